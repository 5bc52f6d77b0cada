"""The paired per-unit log ratio: an interleaved step's effect and its one t interval."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

from analysis.synth_rundir import Cond, write_run
from specload.analysis.inputs.run_columns import load_runs
from specload.analysis.statistics.paired import paired_effect
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


def _blocks(rng: np.random.Generator, g: int, n: int, factor: float) -> tuple[dict, dict]:
    """``g`` pairs of ``n`` values; pair k shares a speed ``s_k`` (a GPU's slow stretch), the
    condition ``factor`` times the baseline, each value with its own noise."""
    cond, base = {}, {}
    for k in range(g):
        s_k = math.exp(rng.normal(0.0, 0.3))
        base[(1, k)] = np.sort(0.010 * s_k * np.exp(rng.normal(0.0, 0.1, n)))
        cond[(1, k)] = np.sort(0.010 * factor * s_k * np.exp(rng.normal(0.0, 0.1, n)))
    return cond, base


def _jackknife(cond: dict, base: dict, q: float) -> tuple[float, float]:
    """The textbook delete-one-pair jackknife of the log ratio of pooled percentiles, by
    brute force."""
    keys = sorted(cond)
    pooled = lambda d, ks: np.concatenate([d[k] for k in ks])  # noqa: E731
    theta = math.log(np.quantile(pooled(cond, keys), q) / np.quantile(pooled(base, keys), q))
    loo = []
    for k in keys:
        rest = [x for x in keys if x != k]
        loo.append(
            math.log(np.quantile(pooled(cond, rest), q) / np.quantile(pooled(base, rest), q))
        )
    jack, g = np.asarray(loo), len(keys)
    return theta, math.sqrt((g - 1) / g * float(((jack - jack.mean()) ** 2).sum()))


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_the_effect_is_the_pooled_ratio_with_a_t_interval_over_the_pairs(q: float) -> None:
    cond, base = _blocks(np.random.default_rng(1), 6, 40, 0.9)
    got = paired_effect(cond, base, q, rng=np.random.default_rng(0))
    assert got is not None and got.units == 6
    theta, se = _jackknife(cond, base, q)
    half = t_quantile(0.975, 5) * se
    est = got.estimate
    assert got.se == pytest.approx(se)
    assert est.value == pytest.approx(math.exp(theta))
    assert (est.lo, est.hi) == pytest.approx((math.exp(theta - half), math.exp(theta + half)))
    lo, hi = percentile_ci(got.replicates)  # the crossover reads the replicates: same interval
    assert math.log(lo / est.lo) == pytest.approx(0.0, abs=0.15 * half)
    assert math.log(hi / est.hi) == pytest.approx(0.0, abs=0.15 * half)


def test_a_percentile_without_a_block_is_numpys_of_the_rest() -> None:
    """Ties included: the bisection counts values, not positions."""
    from specload.analysis.statistics.paired import _quantile_without

    rng = np.random.default_rng(3)
    pooled = np.sort(rng.integers(0, 20, 200).astype(float))
    for _ in range(50):
        out = np.sort(rng.choice(pooled, size=int(rng.integers(1, 60)), replace=False))
        rest = pooled.copy()
        for x in out:
            rest = np.delete(rest, np.searchsorted(rest, x))
        for q in (0.0, 0.3, 0.5, 0.95, 1.0):
            assert _quantile_without(pooled, out, q) == pytest.approx(np.quantile(rest, q))


def test_looks_widen_the_interval_by_the_bonferroni_quantile() -> None:
    cond, base = _blocks(np.random.default_rng(1), 6, 40, 0.9)
    one = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    four = paired_effect(cond, base, 0.5, looks=4, rng=np.random.default_rng(0))
    assert one is not None and four is not None
    width = lambda e: math.log(e.hi / e.lo)  # noqa: E731
    assert width(four.estimate) / width(one.estimate) == pytest.approx(
        t_quantile(1 - 0.025 / 4, 5) / t_quantile(0.975, 5)
    )


def test_only_pairs_both_sides_have_count_and_one_pair_gives_no_interval() -> None:
    cond, base = _blocks(np.random.default_rng(1), 3, 4, 0.9)
    del base[(1, 2)]  # an interrupted session: the condition's last block has no partner
    got = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    assert got is not None and got.units == 2 and got.estimate.lo is not None
    want = np.quantile(np.concatenate([cond[(1, 0)], cond[(1, 1)]]), 0.5) / np.quantile(
        np.concatenate([base[(1, 0)], base[(1, 1)]]), 0.5
    )
    assert got.estimate.value == pytest.approx(want)
    one = paired_effect(
        {(1, 0): cond[(1, 0)]}, {(1, 0): base[(1, 0)]}, 0.5, rng=np.random.default_rng(0)
    )
    assert one is not None and one.estimate.lo is None and one.se is None
    assert paired_effect(cond, {(2, 0): base[(1, 0)]}, 0.5, rng=np.random.default_rng(0)) is None


def test_a_two_regime_condition_is_read_at_its_pooled_percentile() -> None:
    """Blocks whose slow share varies (a server flipping between regimes): each block's p50
    jumps between the two, so the mean of per-block log ratios misses the ratio of the p50s;
    the pooled percentile does not."""
    rng = np.random.default_rng(5)
    cond, base = {}, {}
    for k in range(12):
        slow = rng.random(6) < rng.uniform(0.1, 0.7)  # this block's share of slow requests
        cond[(1, k)] = np.sort(np.where(slow, 0.020, 0.013) * np.exp(rng.normal(0, 0.02, 6)))
        base[(1, k)] = np.sort(0.015 * np.exp(rng.normal(0, 0.02, 6)))
    got = paired_effect(cond, base, 0.5, rng=np.random.default_rng(0))
    assert got is not None
    pooled = np.quantile(np.concatenate(list(cond.values())), 0.5) / np.quantile(
        np.concatenate(list(base.values())), 0.5
    )
    per_block = math.exp(np.mean([math.log(np.median(cond[k]) / np.median(base[k])) for k in cond]))
    assert got.estimate.value == pytest.approx(pooled)
    assert abs(math.log(per_block / pooled)) > 0.05  # what a mean of block ratios would read


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
    0.9 and is less than half as wide as the condition's own interval, which spans the
    blocks' spread."""
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
    assert r.lo < 0.9 < r.hi
    own = s_steps.latency["tpot_p50"]  # the condition's level spans the blocks' spread
    assert own.lo is not None and own.hi is not None
    assert math.log(r.hi / r.lo) < 0.5 * math.log(own.hi / own.lo)
    assert rows["tpot_p50"][0].effect == "helps"
