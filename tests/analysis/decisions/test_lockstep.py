"""Closed-loop users in lockstep: the share of sends within 20 ms of another, and the warning."""

from __future__ import annotations

from pathlib import Path

import orjson

from specload.analysis.compare import compare_runs
from specload.analysis.decisions.closed_loop import lockstep_share
from specload.analysis.inputs.run_columns import load_run
from specload.report.compare_words import comparison_warnings
from tests.analysis.synth_rundir import Cond, write_run


def _closed(path: Path, label: str, together: bool) -> Path:
    """A run whose one step is closed-loop at concurrency 4: sends in bursts of 4 at once
    (``together``) or spread evenly."""
    write_run(path, Cond(label), qps=(2,), n=120, warm=0, metrics=False)
    recs = [orjson.loads(x) for x in (path / "requests.jsonl").read_bytes().splitlines()]
    t0 = recs[0]["sent_at"]
    for i, r in enumerate(recs):
        r["target_qps"], r["concurrency"] = 0.0, 4
        at = t0 + (i // 4) * 0.5 + (0.001 * (i % 4) if together else 0.125 * (i % 4))
        shift = at - r["sent_at"]
        for key in ("scheduled_at", "sent_at", "first_token_at", "done_at"):
            if r.get(key) is not None:
                r[key] += shift
    (path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def test_sends_in_bursts_read_as_lockstep_and_are_warned_about(tmp_path: Path) -> None:
    base = _closed(tmp_path / "b", "baseline", together=True)
    spec = _closed(tmp_path / "s", "spec", together=False)
    assert lockstep_share([load_run(base)]) == 1.0
    assert lockstep_share([load_run(spec)]) == 0.0
    c = compare_runs([base, spec], bootstrap=100)
    assert c.closed_loop[0].lockstep == {"baseline": 1.0, "spec": 0.0}
    assert c.closed_loop[0].in_lockstep == {"baseline": 1.0}
    assert not [w for w in c.warnings if isinstance(w, str)]  # the analysis words nothing
    warned = [w for w in comparison_warnings(c) if "lockstep" in w]
    assert warned == [
        "baseline at concurrency 4: 100% of sends came within 20 ms of another (users in "
        "lockstep): its TTFT there measures bursts of 4 simultaneous prefills"
    ]
