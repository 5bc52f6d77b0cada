"""``StepShape``: the scenario's steps as a Locust ``LoadTestShape`` (runs on the master).

Locust calls ``tick()`` about once a second. The shape keeps the user pool at the scenario's
``max_concurrency``. Its first tick of a run prepares the run (``MasterSide.prepare``:
options, scenario, the web UI's pre-flight), which gives the pool size; Locust's
``test_start``, fired when it starts the users, then starts the ``RunSession``, which owns the
exact step times (announced ahead to the pacers, not bound to tick granularity). When the
session has finished by itself, ``tick()`` returns ``None`` once and Locust ends the run
(headless) or stops it (web UI); bad input, or a run that could not start, ends it too.
"""

from __future__ import annotations

from locust import LoadTestShape

from specload.locust.registry import master_side

__all__ = ["StepShape"]


class StepShape(LoadTestShape):
    """The scenario's QPS steps; users are concurrency slots, not the load itself."""

    def tick(self) -> tuple[int, float] | None:
        side = master_side(self.runner.environment) if self.runner else None
        if side is None:
            return None
        if side.failed:  # test_start could not start the run (already reported)
            side.failed = False
            return None
        session = side.session
        if session is not None and session.finished:
            if not session.stopped_externally and not session.end_reported:
                if session.end_pending():
                    users = int(session.scenario.max_concurrency)  # the final verdict first
                    return users, float(users)
                session.end_comparison()
                session.end_reported = True  # ended by itself: end the Locust run, once
                return None
            session = None  # a new Start after a finished run
        if session is not None:
            scenario = session.scenario
        else:
            prepared = side.pending or side.prepare()
            if prepared is None:  # bad input, already reported
                return None
            scenario = prepared[1]
        users = int(scenario.max_concurrency)
        return users, float(users)  # all users within about a second
