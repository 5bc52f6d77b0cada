"""What the load processes send the master during and after a run: ``WorkerReady``,
``RecordBatch`` and ``FinalCounts``.

Each batch is written as it comes and counted per worker (``ledger.WorkerLedger``), so the
end of the run can check that every request sent has a record. No record is dropped: a batch
or final counts that arrive after run.json's end was written are appended, counted
(``counts.late``) and run.json is rewritten with the run judged again. A mixin of
``RunSession``: the state it reads is the session's (declared below for the type checker
only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specload.locust.messages import FinalCounts, RecordBatch, WorkerReady

if TYPE_CHECKING:
    from specload.locust.ledger import WorkerLedger
    from specload.locust.live import LiveStats
    from specload.recorder.rundir import RunWriter

__all__ = ["RecordIntake"]


class RecordIntake:
    """The master's handlers for the load processes' messages (``plugin.py`` routes them)."""

    if TYPE_CHECKING:
        run_id: str
        ledger: WorkerLedger
        live: LiveStats
        writer: RunWriter
        _end_written: bool
        _ended_as: str

        def _say(self, line: str) -> None: ...
        def _final_counts(self) -> None: ...
        def _judge(self, status: str) -> str: ...

    def on_ready(self, msg: WorkerReady) -> None:
        if msg.run_id != self.run_id:
            return
        self.ledger.ready[msg.worker] = msg
        meta = self.writer.meta
        if msg.lookup_method and meta.lookup_method is None:
            meta.lookup_method = msg.lookup_method
        if msg.worker not in meta.workers:
            meta.workers.append(msg.worker)

    def on_records(self, msg: RecordBatch) -> None:
        """A worker's batch: written, whenever it comes (after the end: ``_late``)."""
        if msg.run_id != self.run_id:
            return
        self.ledger.sent[msg.worker] = max(self.ledger.sent[msg.worker], msg.sent)
        self.live.set_sent_in_window(msg.worker, msg.sent_in_window)
        self.live.set_due(msg.worker, msg.due, msg.queued)
        for label, n in msg.sent_by.items():
            self.ledger.sent_by[msg.worker][label] = max(self.ledger.sent_by[msg.worker][label], n)
        if self._end_written:
            self._late(msg.worker, msg.records)
            return
        self.ledger.received[msg.worker] += self.writer.add_records(msg.records)
        for r in msg.records:
            self.live.add(r)

    def on_final(self, msg: FinalCounts) -> None:
        if msg.run_id == self.run_id:
            self.ledger.finals[msg.worker] = msg
            self.ledger.sent[msg.worker] = max(self.ledger.sent[msg.worker], msg.sent)
            if self._end_written:
                self._rewrite_end()

    def _late(self, worker: str, records: list[dict[str, Any]]) -> None:
        """Records that arrived after run.json's end was written (a worker slow at the end):
        appended to requests.jsonl, counted, and run.json rewritten with the new counts."""
        n = self.writer.append_late(records) if records else 0
        self.ledger.received[worker] += n
        self.ledger.late_records += n
        for r in records:
            self.live.add(r)
        if n:
            self._say(f"{n} records from {worker} arrived after the end: appended to the run")
        self._rewrite_end()

    def _rewrite_end(self) -> None:
        """Counts, lost workers and the verdict again (late records or counts), run.json
        rewritten: what arrived late is in the run, never only in a log."""
        self._final_counts()
        status = self._judge(self._ended_as)
        self.writer.meta.status = status
        self.writer.write_meta()
