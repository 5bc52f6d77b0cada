"""Starts add up, they do not veto: two claims over several server starts.

The interval that decides is about *these* starts: every start's units (time slices here)
pooled as one sample, the construction one start gets, so two starts decide and more starts
narrow it. Beside it, from three starts, the interval about *this config*: a t interval over
the starts paired by replicate (``stats.over_starts``, ``stats.effect_over_starts``), wider
where starts differ, never deciding (``benchmarks/results/config_interval.md``: no valid
interval about the config decides as often at three starts as one start does about
itself). Starts disagree only where one helps and another hurts at a step.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison
from specload.analysis.statistics.effect import HELPS, HURTS, UNDECIDED, classify
from specload.analysis.statistics.stats import Estimate, few_units_widened, over_starts, t9875
from specload.report.html import render_html
from specload.report.jsonout import report_dict
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.tables import crossover_table
from specload.report.terminal import render_terminal
from specload.report.verdict_words import verdicts

QPS = (2, 8)


def _starts(d: Path, factors: list[float]) -> list[Path]:
    """A baseline and a spec run dir per start; spec's TPOT is ``factors[k]`` x the baseline's
    at every load in start k (far beyond the noise of 200 requests)."""
    dirs = []
    for k, f in enumerate(factors, 1):
        meta = {"replicate": k}
        dirs.append(write_run(d / f"baseline-r{k}", Cond("baseline", extra_meta=meta), qps=QPS,
                              n=200, seed=k, metrics=False))  # fmt: skip
        spec = Cond("spec", speculative=SPEC, tpot=lambda q, f=f: f, extra_meta=meta)
        dirs.append(write_run(d / f"spec-r{k}", spec, qps=QPS, n=200, seed=k, metrics=False))
    return dirs


def test_the_config_interval_none_at_two_starts_a_t_widened_one_from_three() -> None:
    reps = np.exp(np.random.default_rng(0).normal(0.0, 0.05, 1000))
    est = Estimate(1.0, 0.9, 1.1)
    none, nan = over_starts(est, reps, 2)
    assert none == Estimate(1.0) and np.isnan(nan).all()
    three, wide = over_starts(est, reps, 3)
    assert (three, wide.tolist()) == (lambda e, r: (e, r.tolist()))(
        *few_units_widened(est, reps, 3, t=t9875)
    )
    # the 97.5 % t quantile (chosen on the simulator's starts): wider than blocks' 95 %
    blocks, _ = few_units_widened(est, reps, 3)
    assert blocks.lo is not None and blocks.hi is not None
    assert three.hi - three.lo > 1.3 * (blocks.hi - blocks.lo)
    assert three.lo is not None and three.hi is not None
    assert three.hi - three.lo > 2 * (
        float(np.percentile(reps, 97.5)) - float(np.percentile(reps, 2.5))
    )


def test_three_starts_whose_bootstrap_collapses_get_the_t_interval_of_their_own_values() -> None:
    """The floor blocks have, over starts too: where the pooled percentile barely moves in
    the bootstrap (most starts' values on one side of a bimodal step), the interval is at
    least the (97.5 %) t interval of the starts' own percentiles."""

    reps = np.full(1000, 1.0) * np.exp(np.random.default_rng(0).normal(0.0, 0.001, 1000))
    est = Estimate(1.0, 0.999, 1.001)
    starts = np.array([0.9, 1.0, 1.15])
    got, _ = over_starts(est, reps, 3, starts)
    half = t9875(2) * float(np.std(np.log(starts), ddof=1)) / np.sqrt(3)
    assert got.lo is not None and got.hi is not None
    assert np.log(got.hi / got.lo) / 2 == pytest.approx(half, rel=0.05)
    plain, _ = over_starts(est, reps, 3)  # without the starts' values: the stretch alone
    assert plain.hi is not None and plain.hi < 1.01


def _width(e: Estimate) -> float:
    assert e.lo is not None and e.hi is not None
    return e.hi - e.lo


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare_runs(_starts(tmp_path_factory.mktemp("two"), [0.7, 0.7]), bootstrap=300)


def test_two_starts_decide_a_clear_effect_about_these_two_starts(two: Comparison) -> None:
    rows = two.ratios["spec"]["tpot_p50"]
    assert {r.effect for r in rows} == {HELPS}
    assert all(r.ratio.hi is not None and r.ratio.hi < 0.8 for r in rows)
    assert all(r.config_ratio is None and r.config_effect is None for r in rows)
    assert two.ci_scope("spec") == "these_starts" and not two.config_ci("spec")
    x = two.crossover("spec", "tpot_p50")
    assert x is not None and x.decided and x.replicates_agree
    assert verdicts(two)["spec"].endswith(
        "(95 % CIs about these 2 server starts only, over 12 time slices per step; "
        "--replicates 3+ gives a claim about this config)"
    )


def test_every_report_labels_the_claim_in_one_wording(two: Comparison) -> None:
    report = build_report(two)
    note = "about these 2 server starts only, over 12 time slices per step"
    data = report_dict(report)
    assert data["schema"] == "specload.report/3"
    spec = next(c for c in data["conditions"] if c["label"] == "spec")
    assert spec["ci_scope"] == "these_starts" and spec["config_ci"] is None
    assert spec["ci_note"].startswith(note)
    assert "too_few_starts" not in data["crossover"]["spec"]["tpot_p50"]
    assert all("config" not in r for r in data["ratios"]["spec"]["tpot_p50"])
    term = io.StringIO()
    render_terminal(report, file=term, width=200)
    for text in (render_markdown(report), render_html(report), term.getvalue()):
        assert note in text
    json.dumps(data)  # report.json stays serialisable


def test_the_pooled_interval_narrows_as_starts_are_added(tmp_path: Path) -> None:
    widths = []
    for k in (1, 3, 5):
        c = compare_runs(_starts(tmp_path / str(k), [0.8] * k), bootstrap=400)
        rows = c.ratios["spec"]["tpot_p50"]
        assert {r.effect for r in rows} == {HELPS}, k
        widths.append(max(_width(r.ratio) for r in rows))
    assert widths[0] > widths[1] > widths[2]


def test_three_starts_that_differ_decide_and_show_the_wider_config_interval(
    tmp_path: Path,
) -> None:
    """Spec 30, 20 and 10 % faster in three starts: the pooled interval (about these
    starts) helps at every step; the one about this config, a t interval over three such
    starts, is wider and reaches beyond no change: shown, not deciding."""
    c = compare_runs(_starts(tmp_path, [0.7, 0.8, 0.9]), bootstrap=400)
    assert c.ci_scope("spec") == "these_starts" and c.config_ci("spec")
    for r in c.ratios["spec"]["tpot_p50"]:
        assert r.effect == HELPS, r.ratio
        assert r.config_ratio is not None and r.config_ratio.lo is not None
        assert r.config_ratio.hi is not None and r.config_ratio.hi > 1.0
        assert r.config_effect == UNDECIDED
        assert _width(r.config_ratio) > 2 * _width(r.ratio)
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and x.replicates_agree and x.decided
    report = build_report(c)
    md = render_markdown(report)
    assert "about these 3 server starts only, over 18 time slices per step" in md
    assert "This config: over 3 starts of spec and 3 of baseline at every step" in md
    assert "this config: p50 TPOT" in md  # the column beside the deciding one
    data = report_dict(report)
    spec = next(c for c in data["conditions"] if c["label"] == "spec")
    assert (spec["ci_scope"], spec["config_ci"]) == ("these_starts", "between_starts")
    row = data["ratios"]["spec"]["tpot_p50"][0]
    assert row["effect"] == HELPS and row["config"]["effect"] == UNDECIDED


def test_one_start_that_hurts_beside_two_that_show_no_change_does_not_veto(
    tmp_path: Path,
) -> None:
    """No change and hurts do not contradict each other: the pooled interval decides (here
    it hurts at 2 req/s), and the verdict says nothing of disagreement."""
    c = compare_runs(_starts(tmp_path, [1.0, 1.0, 1.3]), bootstrap=400)
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and x.replicates_agree and x.split_qps == []
    assert [s.effects[2.0] for s in x.starts] == [UNDECIDED, UNDECIDED, HURTS]
    rows = c.ratios["spec"]["tpot_p50"]
    assert all(r.effect == classify(r.ratio, c.min_gain) for r in rows)
    assert rows[0].effect == HURTS
    assert "disagree" not in verdicts(c)["spec"]


def test_one_start_that_helps_and_one_that_hurts_disagree_and_the_verdict_says_so(
    tmp_path: Path,
) -> None:
    c = compare_runs(_starts(tmp_path, [0.7, 1.3]), bootstrap=300)
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and not x.replicates_agree and x.split_qps == [2.0, 8.0]
    assert not x.decided
    assert verdicts(c)["spec"].startswith(
        "spec: server starts disagree on p50 TPOT at 2 req/s (helps in spec-r1; hurts in spec-r2)"
    )


def test_a_boundary_over_starts_is_bracketed_by_the_steps_that_decide_it(tmp_path: Path) -> None:
    """The percentile interval of the replicates' boundaries held the simulator's true stop in
    2 of 11 sessions over starts; the bracket (``crossover.bracket``) is the two tested loads
    whose own intervals decide it, so the table shows 2–8 whatever the replicates'
    interpolations say, for three starts as for two."""
    dirs = []
    for k, f in enumerate([0.95, 1.0, 1.05], 1):
        meta = {"replicate": k}
        dirs.append(write_run(tmp_path / f"baseline-r{k}", Cond("baseline", extra_meta=meta),
                              qps=QPS, n=200, seed=k, metrics=False))  # fmt: skip
        tpot = lambda q, f=f: f * (0.7 if q < 4 else 1.4)  # noqa: E731
        spec = Cond("spec", speculative=SPEC, tpot=tpot, extra_meta=meta)
        dirs.append(write_run(tmp_path / f"spec-r{k}", spec, qps=QPS, n=200, seed=k,
                              metrics=False))  # fmt: skip
    for runs in (dirs, dirs[:4]):
        x = compare_runs(runs, bootstrap=400).crossover("spec", "tpot_p50")
        assert x is not None and x.stop is not None and x.decided
        assert x.stop.ci == (2, 8) and x.stop.ci_beyond == ("", "")
    table = crossover_table(build_report(compare_runs(dirs, bootstrap=400)))
    assert "2–8" in " ".join(" ".join(r) for r in table.rows)
    assert "bracket" in (table.note or "")
