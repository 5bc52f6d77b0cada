"""Streaming chat completions in open-loop QPS steps, recorded by specload.

    locust -f locustfiles/chat.py --host http://127.0.0.1:8000 \
        --scenario scenarios/smoke.yaml --label baseline --run-dir runs/baseline
"""

from specload.locust import ChatUser, StepShape, install

__all__ = ["ChatUser", "StepShape"]

install()
