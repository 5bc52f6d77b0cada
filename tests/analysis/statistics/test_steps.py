"""condition_steps: run directories are replicates (their units pooled to decide, a two-level
bootstrap over them about the config from three), repeats are pooled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import Cond, write_run
from specload.analysis.inputs.run_columns import RunColumns, load_runs
from specload.analysis.statistics import steps as steps_mod
from specload.analysis.statistics.stats import (
    bootstrap_quantile,
    estimate,
    quantile_sorted,
    rng_for,
)
from specload.analysis.statistics.steps import (
    LATENCY_FIELDS,
    QUANTILES,
    StepStats,
    condition_steps,
)


def _single_level(runs: list[RunColumns], qps: float, b: int, seed: int) -> dict[str, np.ndarray]:
    """What condition_steps computed before replicates: one pooled single-level bootstrap."""
    out = {}
    for fam, col in LATENCY_FIELDS.items():
        parts = []
        for r in runs:
            sel = ~r.cols["warmup"] & (np.round(r.cols["target_qps"], 6) == qps)
            if fam != "queue_delay":
                sel &= r.cols["ok"]
            parts.append(r.cols[col][sel])
        x = np.concatenate(parts)
        x = np.sort(x[~np.isnan(x)])
        for tag, q in QUANTILES.items():
            name = f"{fam}_{tag}"
            out[name] = bootstrap_quantile(x, q, b, rng_for("baseline", qps, name, seed=seed))
    return out


@pytest.fixture(scope="module")
def disagreeing(tmp_path_factory: pytest.TempPathFactory) -> list[RunColumns]:
    """Three server starts of one condition whose TPOT differs by up to 30 % (and one extra
    step in the first)."""
    d = tmp_path_factory.mktemp("replicates")
    a = write_run(d / "start1", Cond("baseline"), qps=(2, 4), n=400, seed=1, metrics=False)
    b, c = (
        write_run(d / f"start{k}", Cond("baseline", tpot=lambda q, f=f: f), qps=(2,), n=400,
                  seed=k, metrics=False)
        for k, f in ((2, 1.3), (3, 1.15))
    )  # fmt: skip
    return load_runs([a, b, c])


def _step(steps: list[StepStats], qps: float) -> StepStats:
    return next(s for s in steps if s.target_qps == qps)


def test_replicates_that_disagree_widen_the_config_ci_far_beyond_pooled_resampling(
    disagreeing: list[RunColumns],
) -> None:
    """The interval about this config (three starts: over them) reaches out to each start's
    own median; the deciding one, over the starts' time slices pooled (about these starts),
    has the same value and is narrower."""
    s = _step(condition_steps("baseline", disagreeing, b=1000, seed=0), 2.0)
    assert s.runs == 3 and s.n == 1200 and s.executions == 3 and s.slices == 18
    pooled = np.sort(
        np.concatenate(
            [r.cols["tpot_s"][~r.cols["warmup"] & (r.cols["step"] == 0)] for r in disagreeing]
        )
    )
    hier, these = s.config_latency["tpot_p50"], s.latency["tpot_p50"]
    assert hier.value == these.value == pytest.approx(quantile_sorted(pooled, 0.5), rel=1e-12)
    assert these.lo is not None and these.hi is not None
    assert hier.lo is not None and hier.hi is not None
    assert these.hi - these.lo < hier.hi - hier.lo
    naive, _ = estimate(pooled, 0.5, 1000, np.random.default_rng(0))
    assert hier.lo is not None and hier.hi is not None
    assert naive.lo is not None and naive.hi is not None
    assert hier.hi - hier.lo > 4 * (naive.hi - naive.lo)
    assert s.replicates["tpot_p50"].shape == (1000,)
    # Each start alone (analysis.decisions.replicates): within-start CIs that do not overlap, and the
    # pooled CI reaches out to each start's own median.
    one, two, _ = (
        _step(condition_steps("baseline", [r], b=1000, seed=0), 2.0).latency["tpot_p50"]
        for r in disagreeing
    )
    assert one.value is not None and one.hi is not None
    assert two.value is not None and two.lo is not None
    assert one.hi < two.lo
    assert two.value / one.value == pytest.approx(1.3, rel=0.05)
    assert hier.lo < one.value * 1.03 and hier.hi > two.value * 0.97


def test_two_run_dirs_give_an_interval_over_their_pooled_slices_and_none_about_the_config(
    disagreeing: list[RunColumns],
) -> None:
    """Two starts add up: their time slices pool into one sample (about these two starts),
    an interval at every metric; none about the config (``stats.over_starts`` needs three)."""
    s = _step(condition_steps("baseline", disagreeing[:2], b=300, seed=0), 2.0)
    assert s.runs == 2 and s.slices == 12
    for name, est in s.latency.items():
        assert est.value is not None and est.lo is not None and est.hi is not None, name
        assert est.lo <= est.value <= est.hi, name
        assert np.isfinite(s.replicates[name]).all(), name
    assert s.config_latency == {} and s.start_replicates == {}


@pytest.fixture()
def uncut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps not cut into time slices (as a step under 15 s is): one run dir's step is then
    the request-level bootstrap (``test_time_slices.py`` covers the cut)."""
    monkeypatch.setattr(steps_mod, "MIN_SLICES", 10**6)


@pytest.mark.usefixtures("uncut")
def test_a_step_only_one_run_dir_reached_is_the_single_level_bootstrap(
    disagreeing: list[RunColumns],
) -> None:
    s = _step(condition_steps("baseline", disagreeing, b=300, seed=4), 4.0)
    assert s.runs == 1
    old = _single_level(disagreeing, 4.0, 300, 4)
    for name, reps in old.items():
        assert np.array_equal(s.replicates[name], reps), name


@pytest.mark.usefixtures("uncut")
def test_one_uncut_run_dir_is_the_request_level_bootstrap(tmp_path: Path) -> None:
    runs = load_runs(
        [
            write_run(
                tmp_path / "r",
                Cond("baseline", error_rate=0.05),
                qps=(2, 8),
                n=300,
                seed=3,
                metrics=False,
            )
        ]
    )
    for s in condition_steps("baseline", runs, b=400, seed=7):
        assert s.runs == 1
        old = _single_level(runs, s.target_qps, 400, 7)
        for name, reps in old.items():
            assert np.array_equal(s.replicates[name], reps), name


@pytest.mark.usefixtures("uncut")
def test_repeats_inside_one_run_dir_are_pooled_not_replicates(tmp_path: Path) -> None:
    # One server, the ladder walked twice: two executions of 2 req/s in one run directory.
    runs = load_runs(
        [write_run(tmp_path / "r", Cond("baseline"), qps=(2, 2), n=200, seed=5, metrics=False)]
    )
    (s,) = condition_steps("baseline", runs, b=200, seed=0)
    assert s.executions == 2 and s.runs == 1
    assert len(s.execution_p50["tpot"]) == 2
    for name, reps in _single_level(runs, 2.0, 200, 0).items():
        assert np.array_equal(s.replicates[name], reps), name


def test_replicated_steps_are_deterministic_for_a_seed(disagreeing: list[RunColumns]) -> None:
    a = _step(condition_steps("baseline", disagreeing, b=300, seed=1), 2.0)
    b = _step(condition_steps("baseline", disagreeing, b=300, seed=1), 2.0)
    c = _step(condition_steps("baseline", disagreeing, b=300, seed=2), 2.0)
    for name in a.replicates:
        assert np.array_equal(a.replicates[name], b.replicates[name]), name
    assert a.latency == b.latency
    assert not np.array_equal(a.replicates["tpot_p50"], c.replicates["tpot_p50"])
    assert a.latency["tpot_p50"].value == c.latency["tpot_p50"].value


def _conversations(path: Path, starts: int, turns: int = 4) -> Path:
    """A 10-second step at 2 req/s target holding ``starts`` conversations of ``turns``."""
    from specload.core.records import RequestRecord
    from specload.recorder import RunMeta, RunWriter

    w = RunWriter(path, RunMeta(run_id="r", label="chat"))
    w.begin_step({"index": 0, "repeat": 0, "target_qps": 2.0, "start": 0.0, "warmup_end": 0.0})
    w.end_step(0, 10.0)
    w.add_records(
        RequestRecord(
            f"r-{c}-{t}",
            "w",
            0,
            2.0,
            False,
            c * 0.5 + t,
            c * 0.5 + t,
            e2e_s=0.5,
            ttft_s=0.1,
            ok=True,
            status=200,
            conversation_id=f"c{c}",
            turn=t,
        )  # fmt: skip
        for c in range(starts)
        for t in range(1, turns + 1)
    )
    w.close("completed", 11.0)
    return path


def test_achieved_load_counts_conversation_starts_and_requests_per_s_every_turn(
    tmp_path: Path,
) -> None:
    """A 4-turn scenario at its target reads its target (not ~4x): later turns carry the
    step's target_qps but are not arrivals it scheduled (``records.counts_as_load``)."""
    from specload.analysis.compare import compare_runs
    from specload.analysis.schedules.batch_schedule import load_points

    (s,) = condition_steps("chat", load_runs([_conversations(tmp_path / "ok", 20)]), b=50)
    assert s.n == 80 and s.achieved_qps == pytest.approx(2.0)
    assert s.requests_per_s == pytest.approx(8.0)
    (point,), source = load_points([s], [])
    assert source == "client" and point.running == pytest.approx(8.0 * 0.5)  # Little's law
    short = compare_runs([_conversations(tmp_path / "short", 14)], bootstrap=50)
    from specload.analysis.comparison import LoadBelowTarget

    (low,) = [w for w in short.warnings if isinstance(w, LoadBelowTarget)]
    assert (low.condition, low.target_qps) == ("chat", 2)
    assert low.achieved_qps == pytest.approx(1.4)  # not 5.6: requests/s count every turn
    from specload.report.model import build_report
    from specload.report.tables import step_table

    (row,) = step_table(build_report(short), "chat").rows
    assert row[1] == "1.4 (5.6 req/s)"  # the per-step table shows both where they differ


def test_one_lateness_rule_late_share_and_fell_behind(tmp_path: Path) -> None:
    """A request is late past ``LATE_S``; a step fell behind when more than 1 in 20 were
    (its p95 queue delay past ``LATE_S``): the published share and the finding agree (they
    used 10 ms and 50 ms: 30 ms late made a step "late" that had not fallen behind)."""
    from specload.analysis.compare import compare_runs
    from specload.analysis.comparison import FellBehind

    conds = (
        Cond("baseline", late_share=0.02),
        Cond("spec", late_share=0.12),
        Cond("prefix", late_share=0.12, late_s=0.03),  # between the two old thresholds
    )
    c = compare_runs([write_run(tmp_path / x.label, x, n=400) for x in conds], bootstrap=200)
    behind = {(w.condition, w.target_qps) for w in c.warnings if isinstance(w, FellBehind)}
    for label, rows in c.steps.items():
        for s in rows:
            flagged = (label, s.target_qps) in behind
            assert flagged == (s.late_share > 0.05), (label, s.target_qps, s.late_share)
    assert {label for label, _ in behind} == {"spec"}
