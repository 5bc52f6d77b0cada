"""``StepShape``: the scenario's steps as a Locust ``LoadTestShape`` (runs on the master).

Locust calls ``tick()`` about once a second. The shape keeps the user pool at the scenario's
``max_concurrency`` and starts a ``RunSession`` on the first tick of each run; the session
owns the exact step times (announced ahead to the pacers, not bound to tick granularity).
When the session has finished by itself, ``tick()`` returns ``None`` once and Locust ends
the run (headless) or stops it (web UI).
"""

from __future__ import annotations

from locust import LoadTestShape

from specload.locust.plugin import master_side

__all__ = ["StepShape"]


class StepShape(LoadTestShape):
    """The scenario's QPS steps; users are concurrency slots, not the load itself."""

    def tick(self) -> tuple[int, float] | None:
        side = master_side(self.runner.environment) if self.runner else None
        if side is None:
            return None
        session = side.session
        if session is not None and session.finished:
            if not session.stopped_externally and not session.end_reported:
                session.end_reported = True  # ended by itself: end the Locust run, once
                return None
            session = None  # a new Start after a finished run
        if session is None:
            session = side.begin()
            if session is None:  # bad input, already reported
                return None
        users = int(session.scenario.max_concurrency)
        return users, float(users)  # all users within about a second
