"""The paired per-unit log ratio: an interleaved step's effect and its one t interval."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis.synth_rundir import Cond, write_run
from specload.analysis.inputs.run_columns import load_runs
from specload.analysis.statistics.paired import min_unit_values, paired_effect
from specload.analysis.statistics.ratios import step_ratios
from specload.analysis.statistics.stats import percentile_ci, t_quantile
from specload.analysis.statistics.steps import condition_steps


@pytest.mark.parametrize(
    ("p", "df", "want"),  # Student's t tables
    [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 5, 2.571), (0.975, 30, 2.042),
     (0.975, 120, 1.980), (0.9875, 3, 4.177), (0.9875, 10, 2.634), (0.995, 7, 3.499)],
)  # fmt: skip
def test_t_quantile_matches_the_tables(p: float, df: int, want: float) -> None:
    assert t_quantile(p, df) == pytest.approx(want, abs=1e-3)


def test_a_unit_needs_three_values_on_its_percentiles_narrow_side() -> None:
    assert [min_unit_values(q) for q in (0.5, 0.95, 0.99)] == [6, 60, 300]


def _pairs(ratios: list[float], n: int = 10) -> tuple[dict, dict]:
    """Pairs whose blocks' p50s stand exactly in ``ratios`` (baseline 10 ms everywhere)."""
    base = {(1, k): np.full(n, 0.010) for k in range(len(ratios))}
    cond = {(1, k): np.full(n, 0.010 * r) for k, r in enumerate(ratios)}
    return cond, base


def test_the_effect_is_the_textbook_t_interval_over_the_pairs_log_ratios() -> None:
    ratios = [0.85, 0.92, 0.88, 0.95, 0.90, 0.83]
    cond, base = _pairs(ratios)
    got = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    assert got is not None and got.units == 6
    est, reps = got.estimate, got.replicates
    d = np.log(ratios)
    half = t_quantile(0.975, 5) * d.std(ddof=1) / math.sqrt(6)
    assert est.value == pytest.approx(math.exp(d.mean()))
    assert (est.lo, est.hi) == pytest.approx((math.exp(d.mean() - half), math.exp(d.mean() + half)))
    lo, hi = percentile_ci(reps)  # the crossover reads the replicates: same interval
    assert math.log(lo / est.lo) == pytest.approx(0.0, abs=0.15 * half)
    assert math.log(hi / est.hi) == pytest.approx(0.0, abs=0.15 * half)


def test_looks_widen_the_interval_by_the_bonferroni_quantile() -> None:
    cond, base = _pairs([0.85, 0.92, 0.88, 0.95, 0.90, 0.83])
    one = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    four = paired_effect(cond, base, 0.5, looks=4, rng=np.random.default_rng(0))
    assert one is not None and four is not None
    width = lambda e: math.log(e.hi / e.lo)  # noqa: E731
    assert width(four.estimate) / width(one.estimate) == pytest.approx(
        t_quantile(1 - 0.025 / 4, 5) / t_quantile(0.975, 5)
    )


def test_short_blocks_merge_with_their_neighbours_of_the_same_start_only() -> None:
    """4 values a block (a p50 needs 6): pairs merge two by two within a start; a start
    with one short pair gives no unit; its values never join another start's."""
    cond, base = _pairs([0.8, 0.8, 0.9, 0.9, 1.0, 1.0], n=4)
    cond[(2, 0)], base[(2, 0)] = np.full(4, 0.5), np.full(4, 0.010)  # a lone short pair
    got = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    assert got is not None and got.units == 3
    d = np.log([0.8, 0.9, 1.0])  # three merged units of start 1; start 2 gives none
    assert got.estimate.value == pytest.approx(math.exp(d.mean()))


def test_fewer_than_two_units_give_no_interval_and_none_give_nothing() -> None:
    cond, base = _pairs([0.8])
    one = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    assert one is not None and one.estimate.value == pytest.approx(0.8)
    assert one.estimate.lo is None and one.se is None
    assert paired_effect(cond, base, 0.99, rng=np.random.default_rng(0)) is None


def _interleaved(root: Path, label: str, factor: float, k: int, seed: int) -> Path:
    """A one-step run whose records fall into ``k`` blocks (their ``repeat`` carries the
    block's k, as in run dirs without the plan); block j runs ``speed[j]`` slower for both
    conditions (a GPU's slow stretch), the condition ``factor`` times the baseline."""
    cond = Cond(label) if label == "baseline" else Cond(label, speculative={"method": "ngram"})
    path = write_run(root / label, cond, qps=(8.0,), n=48 * k, warm=8, seed=seed)
    speed = np.exp(np.random.default_rng(99).normal(0.0, 0.4, k))
    lines = []
    measured = 0
    for raw in (path / "requests.jsonl").read_bytes().splitlines():
        r = orjson.loads(raw)
        if not r["warmup"]:
            j = measured * k // (48 * k)
            measured += 1
            r["block"], r["repeat"] = 2 * j + (label != "baseline"), j
            for f in ("ttft_s", "tpot_s", "e2e_s"):
                if r.get(f) is not None:
                    r[f] = float(r[f] * speed[j] * factor)
        lines.append(orjson.dumps(r))
    (path / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_pairing_cancels_what_a_pairs_two_blocks_share(tmp_path: Path) -> None:
    """Blocks 40 % apart in speed, both sides alike: the pairs' interval holds the true
    0.9 and is narrow, where either side's own interval spans the blocks' spread."""
    base = _interleaved(tmp_path, "baseline", 1.0, 8, seed=1)
    spec = _interleaved(tmp_path, "spec", 0.9, 8, seed=1)
    (b_steps,), (s_steps,) = (
        condition_steps(name, load_runs([p]), b=500)
        for name, p in (("baseline", base), ("spec", spec))
    )
    assert s_steps.blocks == 8 and set(s_steps.pair_units["tpot"]) == {(1, j) for j in range(8)}
    rows, _ = step_ratios([s_steps], [b_steps], min_gain=0.05)
    r = rows["tpot_p50"][0].ratio
    assert r.lo is not None and r.hi is not None
    assert r.lo < 0.9 < r.hi and math.log(r.hi / r.lo) < 0.15
    own = s_steps.latency["tpot_p50"]
    assert own.lo is not None and own.hi is not None and math.log(own.hi / own.lo) > 0.3
    assert rows["tpot_p50"][0].effect == "helps"


def test_time_to_decide_projects_the_pairs_own_standard_error() -> None:
    """A paired interval's standard error is known: the projection uses it and the quantile
    of the looks' interval, not the CI's width read as a 95 % normal one."""
    from specload.analysis.statistics.effect import to_decide_s
    from specload.analysis.statistics.stats import Estimate

    est = Estimate(math.exp(-0.07), math.exp(-0.17), math.exp(0.03))  # undecided
    want = ((1.959964 + 0.841621) * 0.03 / 0.07) ** 2 - 1.0
    assert to_decide_s(est, 0.05, 100.0, se=0.03) == pytest.approx(100.0 * want)
    assert to_decide_s(est, 0.05, 100.0, se=0.03, looks=4) > to_decide_s(est, 0.05, 100.0, se=0.03)
    assert to_decide_s(est, 0.05, 100.0) != to_decide_s(est, 0.05, 100.0, se=0.03)
