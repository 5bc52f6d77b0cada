"""A worker lost mid-run shows in every report format: when, in which step, and the gap.

The lost worker is in the second run of a condition (two run dirs pooled under one label),
so the report must read every run's ``lost_workers``, not only the first one's.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from analysis.synth_rundir import SPEC, Cond, write_run

from specload.cli.main import main


def _lose_a_worker(run: Path, step_index: int) -> float:
    """Mark worker w2 lost in the middle of ``step_index`` of ``run`` (as the master writes it)."""
    steps = orjson.loads((run / "steps.json").read_bytes())
    step = steps[step_index]
    at = (step["start"] + step["end"]) / 2
    meta = orjson.loads((run / "run.json").read_bytes())
    meta["lost_workers"] = [{"worker": "w2", "at": at, "sent": 40, "recorded": 37}]
    (run / "run.json").write_bytes(orjson.dumps(meta))
    return at


def test_lost_worker_in_a_pooled_run_is_reported_with_its_step_and_gap(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2, 4, 8), n=60, warm=5)
    spec = [
        write_run(
            tmp_path / f"spec{i}",
            Cond("spec", speculative=SPEC),
            qps=(2, 4, 8),
            n=60,
            warm=5,
            seed=i,
        )
        for i in (1, 2)
    ]
    _lose_a_worker(spec[1], 1)
    out = tmp_path / "r"
    rc = main(
        ["compare", str(base), *map(str, spec), "--out", str(out), "--bootstrap", "100", "--quiet"]
    )
    assert rc == 0
    expected = "spec (spec2): worker w2 was lost at "
    gap = "during the 4 QPS step: 3 of its 40 requests have no record"
    for name in ("report.md", "report.html"):
        text = (out / name).read_text()
        assert expected in text and gap in text, name
    findings = json.loads((out / "report.json").read_text())["findings"]
    assert sum(expected in f for f in findings) == 1
