"""``ChatUser``: takes an arrival from its process's queue, sends it, reports it.

Deliberately short: pacing lives in ``load.py`` (open loop), measurement in the client,
records go back through the process's outbox, and Locust's rows are fired from the record.
A user that finds the queue empty simply waits on it; it never sleeps on its own.
"""

from __future__ import annotations

from locust import User, task

from specload.locust.events import fire_request_events
from specload.locust.plugin import load_process

__all__ = ["ChatUser"]


class ChatUser(User):
    """One slot of concurrency: the scenario's ``max_concurrency`` users exist in total."""

    @task
    def chat(self) -> None:
        load = load_process(self.environment)
        if load is None:  # e.g. the master process in distributed mode never runs users
            self.stop()
            return
        arrival = load.queue.get()  # blocks (cooperatively) until the pacer has an arrival
        record = load.execute(arrival)
        fire_request_events(self.environment.events, arrival.plan.name, record)
