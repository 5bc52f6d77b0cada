"""The packaged locustfile: what `specload run` gives `locust -f` (same as locustfiles/chat.py).

See ``specload.locust`` for what each name does; ``install()`` hooks specload's options and
events into Locust in every process that imports this file.
"""

from specload.locust import ChatUser, StepShape, install

__all__ = ["ChatUser", "StepShape"]

install()
