"""The master's account of what each load process sent and what reached the run dir.

"Every request sent has exactly one record" is checked here: each worker reports how many
requests it sent (with every batch, and once more in its final counts), the master counts
the records it wrote for it, and the difference is ``unrecorded`` in run.json. A worker that
vanishes without final counts is listed in ``lost_workers`` with what it had sent and what
arrived by then (batches that come later still count); one that was only paused and comes
back with its final counts after the last step is taken off that list again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from specload.locust.messages import FinalCounts, WorkerReady

__all__ = ["WorkerLedger"]

log = logging.getLogger("specload")


@dataclass(slots=True)
class WorkerLedger:
    """Per worker: ready, final counts, requests sent, records written, late records."""

    ready: dict[str, WorkerReady] = field(default_factory=dict)
    finals: dict[str, FinalCounts] = field(default_factory=dict)
    sent: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    received: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: records that arrived after run.json's end was written (appended, counted)
    late_records: int = 0
    #: an interleaved session: per worker, requests sent to each condition's server
    sent_by: defaultdict[str, defaultdict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )

    def names(self) -> list[str]:
        return sorted(set(self.ready) | set(self.sent) | set(self.received))

    def unrecorded(self) -> dict[str, int]:
        """Requests each worker said it sent that have no record here (yet)."""
        return {
            w: self.sent[w] - self.received[w]
            for w in sorted(self.sent)
            if self.sent[w] > self.received[w]
        }

    def counts(self) -> dict[str, Any]:
        """run.json ``counts`` (``unrecorded``: sent without a record; ``late``: appended
        after the end)."""
        by_worker = {w: {"sent": self.sent[w], "recorded": self.received[w]} for w in self.names()}
        out: dict[str, Any] = {
            "sent": sum(self.sent.values()),
            "recorded": sum(self.received.values()),
            "by_worker": by_worker,
            "unrecorded": sum(self.unrecorded().values()),
            "late": self.late_records,
        }
        labels = sorted({label for per in self.sent_by.values() for label in per})
        if labels:
            out["sent_by_condition"] = {
                label: sum(per.get(label, 0) for per in self.sent_by.values()) for label in labels
            }
        return out

    def mark_lost(self, lost_workers: list[dict[str, Any]], gone: set[str], now: float) -> None:
        """Workers gone without final counts: keep what they sent, note when they vanished."""
        for w in sorted(gone):
            if not any(x["worker"] == w for x in lost_workers):
                lost_workers.append(
                    {"worker": w, "at": now, "sent": self.sent[w], "recorded": self.received[w]}
                )
                log.warning("worker %s lost at %.3f", w, now)

    def settle_lost(
        self, lost_workers: list[dict[str, Any]], last_end: float | None, notes: list[str]
    ) -> None:
        """The lost list as it stands at the end: a worker noticed missing only after the
        last step (paused during the drain) whose final counts then arrived was not lost (its
        share ran, its records are in); the others' figures include batches that arrived
        after the loss was noticed."""
        back = [
            x
            for x in lost_workers
            if last_end is not None and x["at"] >= last_end and x["worker"] in self.finals
        ]
        for x in back:
            lost_workers.remove(x)
            notes.append(
                f"worker {x['worker']} missed its heartbeats after the last step (at "
                f"{x['at']:.3f}) and came back with its final counts: not lost"
            )
        for x in lost_workers:
            x["sent"], x["recorded"] = self.sent[x["worker"]], self.received[x["worker"]]
