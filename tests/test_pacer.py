"""Open-loop pacer: seeded, absolute, right mean rate, uncorrelated shares."""

from __future__ import annotations

import math
import statistics

import pytest

from specload.core.pacer import Pacer, derive_seed


def gaps(p: Pacer, n: int) -> list[float]:
    times = [p.next_send_at(i) for i in range(n)]
    return [b - a for a, b in zip([p.start_at, *times], times, strict=False)]


def test_poisson_mean_rate_within_two_percent_over_many_draws() -> None:
    p = Pacer(20.0, "poisson", seed=1, start_at=1000.0)
    n = 40_000
    # the mean of n exponential gaps has relative std 1/sqrt(n) = 0.5 %: 2 % is 4 sigma
    assert p.next_send_at(n - 1) - 1000.0 == pytest.approx(n / 20.0, rel=0.02)


def test_poisson_gaps_are_exponential() -> None:
    g = gaps(Pacer(10.0, "poisson", seed=3, start_at=0.0), 20_000)
    mean = statistics.fmean(g)
    # exponential: std == mean, and P(gap < mean) = 1 - 1/e
    assert statistics.pstdev(g) == pytest.approx(mean, rel=0.05)
    below = sum(x < mean for x in g) / len(g)
    assert below == pytest.approx(1 - math.exp(-1), abs=0.02)


def test_same_seed_same_schedule_any_query_order() -> None:
    a = Pacer(5.0, "poisson", seed=42, start_at=10.0)
    b = Pacer(5.0, "poisson", seed=42, start_at=10.0)
    late_first = b.next_send_at(99)
    assert [a.next_send_at(i) for i in range(100)][-1] == late_first
    assert [a.next_send_at(i) for i in range(100)] == [b.next_send_at(i) for i in range(100)]


def test_different_seed_different_schedule() -> None:
    a = Pacer(5.0, "poisson", seed=1, start_at=0.0)
    b = Pacer(5.0, "poisson", seed=2, start_at=0.0)
    assert [a.next_send_at(i) for i in range(10)] != [b.next_send_at(i) for i in range(10)]


def test_schedule_is_absolute_from_start_at() -> None:
    a = Pacer(5.0, "poisson", seed=9, start_at=0.0)
    b = Pacer(5.0, "poisson", seed=9, start_at=500.0)
    assert b.next_send_at(17) - a.next_send_at(17) == pytest.approx(500.0)


def test_constant_is_evenly_spaced() -> None:
    p = Pacer(4.0, "constant", seed=0, start_at=100.0)
    assert [p.next_send_at(i) for i in range(4)] == [100.0, 100.25, 100.5, 100.75]


def test_constant_shares_interleave_into_one_even_stream() -> None:
    shares = [Pacer.share(6.0, "constant", 0, 0.0, index=k, count=3) for k in range(3)]
    merged = sorted(p.next_send_at(i) for p in shares for i in range(20))
    assert merged == pytest.approx([i / 6.0 for i in range(60)])


def test_poisson_shares_sum_to_the_step_rate_and_differ() -> None:
    w, rate, n = 4, 40.0, 10_000
    shares = [Pacer.share(rate, "poisson", 7, 0.0, index=k, count=w) for k in range(w)]
    assert all(p.rate_qps == rate / w for p in shares)
    firsts = [tuple(p.next_send_at(i) for i in range(5)) for p in shares]
    assert len(set(firsts)) == w  # no two processes replay the same stream
    merged = sorted(p.next_send_at(i) for p in shares for i in range(n))
    horizon = min(p.next_send_at(n - 1) for p in shares)
    count = sum(t <= horizon for t in merged)
    assert count / horizon == pytest.approx(rate, rel=0.03)


def test_poisson_shares_are_uncorrelated() -> None:
    a, b = (Pacer.share(10.0, "poisson", 5, 0.0, index=k, count=2) for k in range(2))
    ga, gb = gaps(a, 5000), gaps(b, 5000)
    assert abs(statistics.correlation(ga, gb)) < 0.05


def test_first_at_or_after_counts_the_arrivals_before_a_time() -> None:
    p = Pacer(10.0, "constant", seed=0, start_at=0.0)
    assert [t for _, t in _until(p, 1.0)] == [i / 10 for i in range(10)]
    assert p.first_at_or_after(1.0) == 10
    assert p.first_at_or_after(0.75) == 8


def test_derive_seed_is_stable_and_label_sensitive() -> None:
    assert derive_seed(1, "step", 3) == derive_seed(1, "step", 3)
    assert derive_seed(1, "step", 3) != derive_seed(1, "step", 4)
    assert 0 <= derive_seed(123, "x") < 2**63


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_qps": 0.0, "arrival": "poisson"},
        {"rate_qps": -1.0, "arrival": "constant"},
        {"rate_qps": float("inf"), "arrival": "poisson"},
        {"rate_qps": 1.0, "arrival": "bursty"},
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Pacer(seed=0, start_at=0.0, **kwargs)


@pytest.mark.parametrize("b", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_a_cv_of_one_over_sqrt_burstiness(b: float) -> None:
    """vLLM's ``--burstiness``: mean gap 1/rate whatever b, CV 1/sqrt(b) (seeded moments)."""
    g = gaps(Pacer(10.0, "gamma", seed=3, start_at=0.0, burstiness=b), 20_000)
    mean = statistics.fmean(g)
    assert mean == pytest.approx(0.1, rel=0.03)
    assert statistics.pstdev(g) / mean == pytest.approx(1 / math.sqrt(b), rel=0.05)


def test_gamma_shares_merge_into_the_one_bursty_stream() -> None:
    """Three processes send every third arrival of one stream: merged, it is that stream
    (independent gamma streams would superpose into something smoother)."""
    whole = Pacer(12.0, "gamma", seed=5, start_at=100.0, burstiness=0.2)
    parts = [
        Pacer.share(12.0, "gamma", 5, 100.0, index=k, count=3, burstiness=0.2) for k in range(3)
    ]
    merged = sorted(t for p in parts for t in (p.next_send_at(i) for i in range(400)))
    assert merged == [whole.next_send_at(j) for j in range(1200)]
    assert all(p.rate_qps == pytest.approx(4.0) for p in parts)


def test_burstiness_must_be_positive() -> None:
    with pytest.raises(ValueError, match="burstiness"):
        Pacer(1.0, "gamma", seed=0, start_at=0.0, burstiness=0.0)


def test_a_counted_window_holds_exactly_its_count_and_leaves_the_rest_alone() -> None:
    from specload.core.pacer import CountedWindow

    base = Pacer(6.0, "poisson", 3, 0.0)
    whole = CountedWindow(base, 6.0, 9, 1.0, 3.0)
    times = [t for _, t in _until(whole, 6.0)]
    assert sum(1.0 <= t < 3.0 for t in times) == 12  # round(6 req/s x 2 s), every draw
    assert [t for t in times if t < 1.0] == [t for _, t in _until(base, 1.0)]
    after = [t for t in times if t >= 3.0]
    assert after == [t for _, t in _until(base, 6.0) if t >= 3.0]
    assert times == sorted(times)
    # two processes split the window's one list between them, nothing twice or skipped
    shares = [CountedWindow(base, 6.0, 9, 1.0, 3.0, index=k, count=2) for k in (0, 1)]
    split = sorted(t for p in shares for t in p.window)
    assert split == [t for t in times if 1.0 <= t < 3.0]
    assert whole.first_at_or_after(1.0) == sum(t < 1.0 for t in times)


def _until(pacer, end: float):  # type: ignore[no-untyped-def]
    """``(i, send_at)`` for every arrival of ``pacer`` due before ``end``."""
    i = 0
    while (t := pacer.next_send_at(i)) < end:
        yield i, t
        i += 1
