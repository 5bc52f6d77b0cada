"""Which load processes exist, as the master sees them, for the local and the master runner.

Locust's runners differ (``LocalRunner`` is one process that is its own worker;
``MasterRunner`` keeps ``clients`` with heartbeat states). This small view hides the
difference, so the run session is written once for both.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOCAL_WORKER", "WorkerView"]

#: The worker id of a local (single-process) run.
LOCAL_WORKER = "local"


class WorkerView:
    """Connected load processes, and which of them take a share of the load."""

    def __init__(self, runner: Any) -> None:
        from locust.runners import MasterRunner

        self.runner = runner
        self.distributed = isinstance(runner, MasterRunner)

    def connected(self) -> list[str]:
        """Workers alive right now (heartbeat not missing); ``["local"]`` in a local run."""
        if not self.distributed:
            return [LOCAL_WORKER]
        from locust.runners import STATE_MISSING

        return [c.id for c in list(self.runner.clients.all) if c.state != STATE_MISSING]

    def spawned(self) -> bool:
        """All users of the current start are spawned (so a step's share has users to run it)."""
        if self.distributed:
            return bool(self.runner.spawning_completed)
        return bool(self.runner.state == "running")

    def users(self, worker: str) -> int:
        if not self.distributed:
            return int(self.runner.user_count)
        node = self.runner.clients.get(worker)
        return sum(node.user_classes_count.values()) if node is not None else 0

    def candidates(self, ready: dict[str, Any]) -> set[str]:
        """Connected, ready (prompts taken, client built, no error) and holding users: these
        split a step."""
        return {
            w
            for w in self.connected()
            if w in ready and not getattr(ready[w], "error", None) and self.users(w) > 0
        }

    def lost_since(self, ready: set[str], finished: set[str]) -> set[str]:
        """Workers that were ready for the run and are gone without reporting their counts."""
        return ready - set(self.connected()) - finished
