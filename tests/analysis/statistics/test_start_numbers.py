"""Server starts are told apart even when their run dirs carry one replicate number.

Sweeps run apart (three GPU kit sessions, say) each stamp ``replicate: 1``. Each is still a
server start of its own: its blocks stay its own units, and it pairs with the baseline's
start of the same place in start order (``steps.start_numbers``).
"""

from __future__ import annotations

from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.inputs.run_columns import load_runs
from specload.analysis.statistics.steps import start_numbers

QPS = (2, 8)


def _starts(d: Path, meta_of: list[dict[str, object]]) -> list[Path]:
    dirs = []
    for k, meta in enumerate(meta_of, 1):
        dirs.append(write_run(d / f"b{k}", Cond("baseline", extra_meta=meta), qps=QPS, n=80,
                              seed=k, metrics=False))  # fmt: skip
        spec = Cond("spec", speculative=SPEC, tpot=lambda q: 0.8, extra_meta=meta)
        dirs.append(write_run(d / f"s{k}", spec, qps=QPS, n=80, seed=k, metrics=False))
    return dirs


def test_one_replicate_number_for_every_start_numbers_them_by_start_time(tmp_path: Path) -> None:
    metas: list[dict[str, object]] = [
        {"replicate": 1, "started_at": t} for t in (3000.0, 1000.0, 2000.0)
    ]
    runs = load_runs(_starts(tmp_path, metas)[1::2])  # spec's three
    assert start_numbers(runs) == [3, 1, 2]
    c = compare_runs(_starts(tmp_path / "c", metas), bootstrap=200)
    for s in c.steps["spec"]:
        assert s.runs == 3
        assert set(s.start_values["tpot_p50"]) == {1, 2, 3}  # three starts, not one
        assert "tpot_p50" in s.config_latency  # the interval about this config: 3 starts


def test_distinct_replicate_numbers_are_kept(tmp_path: Path) -> None:
    metas: list[dict[str, object]] = [{"replicate": r} for r in (2, 5, 1)]
    runs = load_runs(_starts(tmp_path, metas)[1::2])
    assert start_numbers(runs) == [2, 5, 1]
