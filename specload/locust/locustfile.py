"""The packaged locustfile: ``locust -f`` this (or ``locustfiles/chat.py``), or ``specload run``.

See ``specload.locust`` for what each name does; ``install()`` hooks specload's options and
events into Locust in every process that imports this file.
"""

from specload.locust import ChatUser, StepShape, install

__all__ = ["ChatUser", "StepShape"]

install()
