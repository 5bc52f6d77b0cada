"""``ChatUser``: takes an arrival from its process's queue, sends it, reports it.

Deliberately short: pacing lives in ``load_process.py`` (open loop), measurement in the client,
records go back through the process's outbox, and Locust's rows are fired from the record.
A user that finds the queue empty simply waits on it; it never sleeps on its own.

Locust removes users from a worker by killing them when it re-dispatches users (a worker joins
or goes missing). A user killed mid-request would end that request as ``cancelled``: an error
the server never caused, inside a measured step. So while the runner is running, a user with a
request in flight finishes it first and then leaves; an idle user (waiting on the queue) goes
at once, and every real stop (Stop, Ctrl-C, ``Drain(abort)``) still cancels what is in flight.
"""

from __future__ import annotations

from typing import Any

from locust import User, task
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from specload.locust.events import fire_request_events
from specload.locust.registry import load_process

__all__ = ["ChatUser"]


class ChatUser(User):
    """One slot of concurrency: the scenario's ``max_concurrency`` users exist in total."""

    _busy = False  # a request is in flight

    @task
    def chat(self) -> None:
        load = load_process(self.environment)
        if load is None:  # e.g. the master process in distributed mode never runs users
            self.stop()
            return
        arrival = load.queue.get()  # blocks (cooperatively) until the pacer has an arrival
        self._busy = True
        try:
            record = load.execute(arrival)
        finally:
            self._busy = False
        fire_request_events(self.environment, arrival.plan.name, record)

    def stop(self, force: bool = False) -> Any:
        """A re-dispatch (runner still running) lets a request in flight finish (module doc)."""
        runner = self.environment.runner
        if (
            force
            and self._busy
            and runner is not None
            and runner.state in (STATE_RUNNING, STATE_SPAWNING)
        ):
            force = False
        return super().stop(force=force)
