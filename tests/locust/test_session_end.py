"""The end of a run on the master (``RunSession``), in-process: no record is ever dropped.

A batch that arrives after run.json's end was written is appended and run.json rewritten;
requests a worker sent that never got a record are counted in run.json, name the run
``degraded`` and reach the readers' warnings (so the report). The distributed check, a worker
paused across the end of a real run, is a fault-matrix row (``tests/faults/test_matrix.py``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specload.analysis.inputs.run_columns import Unrecorded, load_run
from specload.core.ports import free_port
from specload.core.records import RequestRecord
from specload.locust.messages import FinalCounts, RecordBatch, WorkerReady
from specload.locust.session import RunSession
from specload.options.run import RunOptions
from specload.recorder import read_run
from specload.scenario import parse_scenario


class FakeRunner:
    """A local runner's surface as the session uses it: messages go nowhere."""

    def __init__(self) -> None:
        self.environment = SimpleNamespace(process_exit_code=None)
        self.user_count = 0
        self.state = "running"

    def send_message(self, *_args: Any, **_kw: Any) -> None:
        pass


def _session(tmp_path: Path) -> RunSession:
    scenario = parse_scenario({"steps": [2], "prompts": {"synthetic": {"count": 4}}}, file="s")
    host = f"http://127.0.0.1:{free_port()}"  # nobody listens: no server info, quickly
    opts = RunOptions(None, "late", str(tmp_path / "run"), host, headless=True)
    session = RunSession(FakeRunner(), scenario, opts, None)
    session.on_ready(WorkerReady(session.run_id, "w1"))
    return session


def _records(session: RunSession, ids: range) -> list[dict[str, Any]]:
    return [
        RequestRecord(
            f"{session.run_id}-w1-{i}", "w1", 0, 2.0, False, 1.0, 1.0, ok=True, status=200
        ).to_dict()
        for i in ids
    ]


def _batch(session: RunSession, ids: range, sent: int) -> RecordBatch:
    return RecordBatch(session.run_id, "w1", _records(session, ids), sent)


def test_a_batch_after_the_end_is_appended_and_run_json_updated(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.on_records(_batch(session, range(3), sent=5))
    session.finish("completed")  # two requests still on their way: counted, run degraded
    meta = read_run(session.writer.path).meta
    assert meta.status == "degraded" and meta.counts["unrecorded"] == 2
    assert "worker w1: 2 requests sent without a record" in meta.degraded
    assert session.runner.environment.process_exit_code == 1
    assert Unrecorded(session.writer.path, 2) in load_run(session.writer.path).warnings

    session.on_records(_batch(session, range(3, 5), sent=5))  # the slow worker's last batch
    session.on_final(FinalCounts(session.run_id, "w1", 5, 5))
    run = read_run(session.writer.path)
    ids = [r["request_id"] for r in run.record_dicts()]
    assert ids == [f"{session.run_id}-w1-{i}" for i in range(5)]
    counts = run.meta.counts
    assert (counts["sent"], counts["recorded"], counts["unrecorded"], counts["late"]) == (
        5,
        5,
        0,
        2,
    )
    assert run.meta.status == "completed" and run.meta.degraded == []
    assert session.runner.environment.process_exit_code is None
    assert not any("without a record" in w for w in run.warnings)


def test_an_interrupted_run_names_what_it_lost(tmp_path: Path) -> None:
    """Ctrl-C: whatever a worker held and never delivered is counted, never only logged."""
    session = _session(tmp_path)
    session.on_records(_batch(session, range(2), sent=3))
    session.stop()
    run = read_run(session.writer.path)
    assert run.meta.status == "interrupted" and run.meta.counts["unrecorded"] == 1
    assert run.meta.counts["by_worker"]["w1"] == {"sent": 3, "recorded": 2}
    assert any("1 requests sent without a record" in w for w in run.warnings)


@pytest.mark.parametrize("status", ["completed", "interrupted"])
def test_the_end_waits_for_nothing_when_every_record_is_in(tmp_path: Path, status: str) -> None:
    session = _session(tmp_path)
    session.on_records(_batch(session, range(4), sent=4))
    session.on_final(FinalCounts(session.run_id, "w1", 4, 4))
    session.finish(status)
    meta = read_run(session.writer.path).meta
    assert meta.status == status and meta.counts["unrecorded"] == 0
    assert meta.counts["late"] == 0
