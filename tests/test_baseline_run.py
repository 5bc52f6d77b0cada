"""The baseline run a live run is compared against (``specload/recorder/baseline_run.py``).

Read once before any traffic: a finished run gives its label, status, id and scenario; a
folder that is not a finished run (no run.json, no records) is one ``--baseline-run`` line.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from specload.core.errors import ConfigError
from specload.recorder.baseline_run import load_baseline
from tests.analysis.synth_rundir import Cond, write_run


def test_a_finished_run_is_read_once(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2,), n=20, metrics=False)
    meta = orjson.loads((base / "run.json").read_bytes())
    b = load_baseline(str(base))
    assert b.path == base and b.label == "baseline" and b.status == meta["status"]
    assert b.run_id == (meta.get("run_id") or base.name)
    assert b.scenario == meta["scenario"]


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--baseline-run.*not a run directory"):
        load_baseline(tmp_path)


@pytest.mark.parametrize(
    ("records", "said"),
    [(None, "No such file"), (b"", "no records"), (b"not json\n[1]\n", "no records")],
)
def test_a_run_without_records_is_refused_before_any_traffic(
    tmp_path: Path, records: bytes | None, said: str
) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2,), n=20, metrics=False)
    jsonl = base / "requests.jsonl"
    if records is None:
        jsonl.unlink()
    else:
        jsonl.write_bytes(records)
    with pytest.raises(ConfigError, match=f"requests.jsonl.*--baseline-run.*{said}") as exc:
        load_baseline(base)
    assert "expected a finished specload run" in str(exc.value)
