"""The interval over server starts: a t interval over them from three on, none at two.

``benchmarks/results/coverage.md`` measured it: pooled starts under the plain two-level
bootstrap covered a new start's ratio at 35-90 %; stretched like a t interval over the starts
(``stats.over_starts``) it covers, and at two starts it is so wide that it decides nothing,
so none is printed: every report says "2 starts: too few for a 95 % interval over starts"
and gives each start's own effects instead.
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
from specload.analysis.statistics.effect import HELPS, UNDECIDED
from specload.analysis.statistics.stats import Estimate, few_units_widened, over_starts, t9875
from specload.analysis.wording import too_few_starts_text
from specload.report.html import render_html
from specload.report.jsonout import report_dict
from specload.report.markdown import render_markdown
from specload.report.model import build_report
from specload.report.tables import crossover_table
from specload.report.terminal import render_terminal
from specload.report.verdict_words import verdicts

QPS = (2, 8)
TOO_FEW = too_few_starts_text(2)


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


def test_two_starts_give_no_interval_three_a_t_widened_one() -> None:
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


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare_runs(_starts(tmp_path_factory.mktemp("two"), [0.7, 0.7]), bootstrap=300)


def test_two_starts_decide_nothing_and_give_each_start_alone(two: Comparison) -> None:
    rows = two.ratios["spec"]["tpot_p50"]
    assert all(r.ratio.value is not None and r.ratio.lo is None for r in rows)
    assert {r.effect for r in rows} == {UNDECIDED}
    assert all(r.to_decide_s is None for r in rows)  # no interval: no time can be said
    x = two.crossover("spec", "tpot_p50")
    assert x is not None and x.too_few_starts == 2 and not x.decided
    # each start alone still helps by its own CI, and says so: the figures that stand
    assert [set(s.effects.values()) for s in x.starts] == [{HELPS}, {HELPS}]
    assert verdicts(two)["spec"] == (
        f"spec: {TOO_FEW}, no decision; each start alone (about that start only): "
        "spec-r1 helps at 2, 8 req/s, spec-r2 helps at 2, 8 req/s"
    )


def test_every_report_says_it_in_the_one_wording(two: Comparison) -> None:
    report = build_report(two)
    row = next(r for r in crossover_table(report).rows if r[:2] == ["spec", "p50 TPOT"])
    assert row[2] == TOO_FEW
    data = report_dict(report)
    spec = next(c for c in data["conditions"] if c["label"] == "spec")
    assert (spec["ci_scope"], spec["ci_note"]) == ("none", TOO_FEW)
    assert data["crossover"]["spec"]["tpot_p50"]["too_few_starts"] == TOO_FEW
    term = io.StringIO()
    render_terminal(report, file=term, width=200)
    for text in (render_markdown(report), render_html(report), term.getvalue()):
        assert TOO_FEW in text
    assert "95 % CIs are about this config" not in render_markdown(report)
    json.dumps(data)  # report.json stays serialisable
    [undecided] = [a for a in report.advice if a.kind == "undecided" and a.condition == "spec"]
    assert f"spec: no decision yet: {TOO_FEW}" in undecided.text


def test_three_starts_that_differ_get_an_interval_over_starts(tmp_path: Path) -> None:
    """Spec 30, 20 and 10 % faster in three starts: each start alone is certain, the plain
    two-level bootstrap called the pooled change significant, a t interval over three such
    starts reaches beyond no change."""
    c = compare_runs(_starts(tmp_path, [0.7, 0.8, 0.9]), bootstrap=400)
    assert c.ci_scope("spec") == "between_starts" and c.too_few_starts("spec") == 0
    note = "95 % CIs are about this config: t intervals over server starts paired by replicate (3 of spec, 3 of baseline, at every step)"
    assert note in render_markdown(build_report(c))
    for r in c.ratios["spec"]["tpot_p50"]:
        assert r.ratio.lo is not None and r.ratio.hi is not None
        assert r.ratio.lo < 0.7 and r.ratio.hi > 1.0, r.ratio
        assert r.effect == UNDECIDED
    x = c.crossover("spec", "tpot_p50")
    assert x is not None and x.too_few_starts == 0 and x.replicates_agree


def test_a_boundary_over_starts_is_bracketed_by_the_steps_that_decide_it(tmp_path: Path) -> None:
    """The percentile interval of the replicates' boundaries held the simulator's true stop in
    2 of 11 sessions over starts; the bracket (``crossover.bracket``) is the two tested loads
    whose own intervals over the starts decide it, so the table shows 2–8 whatever the
    replicates' interpolations say, for three starts as for one."""
    dirs = []
    for k, f in enumerate([0.95, 1.0, 1.05], 1):
        meta = {"replicate": k}
        dirs.append(write_run(tmp_path / f"baseline-r{k}", Cond("baseline", extra_meta=meta),
                              qps=QPS, n=200, seed=k, metrics=False))  # fmt: skip
        tpot = lambda q, f=f: f * (0.7 if q < 4 else 1.4)  # noqa: E731
        spec = Cond("spec", speculative=SPEC, tpot=tpot, extra_meta=meta)
        dirs.append(write_run(tmp_path / f"spec-r{k}", spec, qps=QPS, n=200, seed=k,
                              metrics=False))  # fmt: skip
    for runs in (dirs, dirs[:2]):
        x = compare_runs(runs, bootstrap=400).crossover("spec", "tpot_p50")
        assert x is not None and x.stop is not None and x.too_few_starts == 0
        assert x.stop.ci == (2, 8) and x.stop.ci_beyond == ("", "")
    table = crossover_table(build_report(compare_runs(dirs, bootstrap=400)))
    assert "2–8" in " ".join(" ".join(r) for r in table.rows)
    assert "bracket" in (table.note or "")
