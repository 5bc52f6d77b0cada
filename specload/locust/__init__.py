"""specload's Locust integration: the only package (with ``cli``) that imports Locust.

A locustfile needs three lines::

    from specload.locust import ChatUser, StepShape, install
    install()

Names are imported lazily so that ``import specload.locust.messages`` (and tests of the
pure parts) do not import Locust, which monkey-patches the standard library with gevent.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChatUser", "StepShape", "install"]


def __getattr__(name: str) -> Any:
    if name == "ChatUser":
        from specload.locust.users import ChatUser

        return ChatUser
    if name == "StepShape":
        from specload.locust.shape import StepShape

        return StepShape
    if name == "install":
        from specload.locust.plugin import install

        return install
    raise AttributeError(f"module 'specload.locust' has no attribute {name!r}")
