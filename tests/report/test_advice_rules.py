"""Recommendation rules on constructed compare figures: each rule fires when, and only when, due.

Steps arrive with their effect (the one rule) and conditions with their status, so these tests
check that the advice says what the verdict says, and that it never names a feature the
condition is not known to have.
"""

from __future__ import annotations

from specload.report.advice_rules import (
    Advice,
    AdviceInput,
    Bound,
    ConditionFigures,
    StepFigures,
    advise,
)


def steps(
    *pairs: tuple[float, float], p95: dict[float, float] | None = None, min_gain: float = 0.05
) -> tuple[StepFigures, ...]:
    """Steps from (qps, p50 ratio), effects by the threshold alone (as if every CI were tight);
    p95 ratio equal to p50 unless given."""
    p95 = p95 or {}

    def eff(r: float) -> str:
        return "helps" if r <= 1 - min_gain else "hurts" if r >= 1 + min_gain else "same"

    return tuple(StepFigures(q, r, p95.get(q, r), eff(r), eff(p95.get(q, r))) for q, r in pairs)


def spec(label: str = "spec-k4", **kw: object) -> ConditionFigures:
    base: dict[str, object] = {
        "label": label,
        "speculative": True,
        "prefix_caching": False,
        "num_speculative_tokens": 4,
        "acceptance_rate": 0.7,
        "per_position": (0.85, 0.7, 0.55, 0.4),
    }
    base.update(kw)
    return ConditionFigures(**base)  # type: ignore[arg-type]


def crossing(**kw: object) -> ConditionFigures:
    return spec(
        steps=steps((1, 0.7), (4, 0.8), (16, 1.1)),
        status="crosses",
        stop=Bound(9.5, 7.0, 12.0),
        **kw,
    )


def kinds(advice: list[Advice]) -> list[str]:
    return [a.kind for a in advice]


def only(advice: list[Advice], kind: str) -> Advice:
    found = [a for a in advice if a.kind == kind]
    assert len(found) == 1, kinds(advice)
    return found[0]


def test_keep_on_up_to_where_it_stops_helping_below_the_operating_point() -> None:
    out = advise(AdviceInput(baseline="baseline", conditions=(crossing(),), operating_qps=4.0))
    keep = only(out, "keep")
    assert "keep speculative decoding on up to ≈ 9.5 req/s (95 % CI 7–12)" in keep.text
    assert "At your operating point, 4 req/s, it helps: keep it on there." in keep.text
    assert keep.figures["stop_qps"] == 9.5
    assert "off" not in kinds(out)


def test_a_ci_bound_beyond_the_tested_range_reads_as_in_the_verdict() -> None:
    """The advice and the verdict write a boundary's CI one way (``boundary_ci_text``)."""
    from specload.analysis.decisions.crossover import Boundary
    from specload.report.crossover_words import boundary_ci_text

    stop = Boundary(9.5, (7.0, None), ("", "above"))
    c = spec(steps=steps((1, 0.7), (4, 0.8), (16, 1.1)), status="crosses",
             stop=Bound(stop.qps, *stop.ci, stop.ci_beyond))  # fmt: skip
    keep = only(advise(AdviceInput("baseline", (c,), operating_qps=4.0)), "keep")
    assert boundary_ci_text(stop, (1, 16)) == "7–>16"
    assert "(95 % CI 7–>16)" in keep.text, keep.text


def test_operating_point_above_the_stop_says_leave_it_off_there() -> None:
    keep = only(advise(AdviceInput("baseline", (crossing(),), operating_qps=16.0)), "keep")
    assert "16 req/s, it does not help: leave it off there" in keep.text


def test_operating_point_inside_the_ci_is_too_close_to_call() -> None:
    keep = only(advise(AdviceInput("baseline", (crossing(),), operating_qps=10.0)), "keep")
    assert "too close to call" in keep.text


def test_missing_operating_point_is_said() -> None:
    keep = only(advise(AdviceInput("baseline", (crossing(),))), "keep")
    assert "No operating point was given" in keep.text


def test_helping_at_every_step_says_so_and_asks_to_measure_above() -> None:
    c = spec(steps=steps((1, 0.7), (2, 0.75), (4, 0.8)), status="always_helps")
    keep = only(advise(AdviceInput("baseline", (c,), operating_qps=8.0)), "keep")
    assert "every tested load up to 4 req/s" in keep.text
    assert "above the tested range" in keep.text


def test_starting_to_help_says_from_where_and_not_keep_up_to() -> None:
    c = spec(
        "prefix",
        speculative=False,
        prefix_caching=True,
        steps=steps((2, 1.0), (8, 0.9), (24, 0.64)),
        status="starts_helping",
        start=Bound(5.1, 3.9, 6.8),
    )
    out = advise(AdviceInput("baseline", (c,), operating_qps=16.0))
    starts = only(out, "starts")
    assert "prefix caching helps p50 TPOT only from ≈ 5.1 req/s (95 % CI 3.9–6.8)" in starts.text
    assert "16 req/s, it helps: keep it on there" in starts.text
    assert "off" not in kinds(out) and "stops" not in starts.text


def test_never_helping_says_turn_it_off_and_names_where_it_hurt() -> None:
    c = spec(steps=steps((1, 0.99), (4, 1.05), (16, 1.3)), status="never_helps")
    out = advise(AdviceInput("baseline", (c,)))
    off = only(out, "off")
    assert "speculative decoding never helped p50 TPOT at a tested load (1–16 req/s)" in off.text
    assert "it hurt at 4, 16 req/s" in off.text and "turn speculative decoding off" in off.text
    assert "keep" not in kinds(out)


def test_unknown_features_get_advice_about_the_condition_not_a_feature() -> None:
    """A ``candidate-build`` with nothing declared was once told 'prefix caching never helped'."""
    c = ConditionFigures(
        "candidate-build",
        None,
        None,
        steps=steps((1, 1.0), (4, 1.02)),
        status="never_helps",
    )
    off = only(advise(AdviceInput("baseline", (c,))), "off")
    assert "prefix caching" not in off.text and "speculative" not in off.text
    assert "keep the baseline (baseline)" in off.text


def test_server_starts_that_disagree_get_no_decision() -> None:
    """Starts disagree by their per-step effects (``Crossover.split_qps``), whatever their
    status labels: the advice names the loads and decides nothing."""
    c = crossing(starts=2, split_qps=(16.0,))
    out = advise(AdviceInput("baseline", (c,), operating_qps=4.0))
    undecided = only(out, "undecided")
    assert "server starts disagree on p50 TPOT at 16 req/s" in undecided.text
    assert "each of the 2 starts" in undecided.text
    assert undecided.figures["split_qps"] == [16.0]
    assert "keep" not in kinds(out) and "off" not in kinds(out)
    agreeing = advise(AdviceInput("baseline", (crossing(starts=2),), operating_qps=4.0))
    assert "undecided" not in kinds(agreeing) and "keep" in kinds(agreeing)


def test_low_acceptance_says_turn_it_off() -> None:
    c = spec(
        acceptance_rate=0.12,
        per_position=(0.2, 0.1, 0.05, 0.01),
        steps=steps((1, 0.97)),
        status="never_helps",
    )
    texts = [a.text for a in advise(AdviceInput("baseline", (c,))) if a.kind == "off"]
    assert any("only 12 % of drafted tokens were accepted" in t for t in texts)


def test_good_acceptance_gives_no_low_acceptance_advice() -> None:
    c = spec(acceptance_rate=0.65, steps=steps((1, 0.7)), status="always_helps")
    assert "off" not in kinds(advise(AdviceInput("baseline", (c,))))


def test_acceptance_falling_off_after_position_one_suggests_k_two() -> None:
    c = spec(per_position=(0.8, 0.45, 0.12, 0.05), steps=steps((1, 0.8)), status="always_helps")
    lower = only(advise(AdviceInput("baseline", (c,))), "lower_k")
    assert "from 4 to 2" in lower.text and "after position 1" in lower.text
    assert "80 %, 45 %, 12 %, 5 %" in lower.text
    assert lower.figures["suggested"] == 2.0


def test_steady_acceptance_keeps_k() -> None:
    c = spec(per_position=(0.9, 0.8, 0.7, 0.6), steps=steps((1, 0.8)), status="always_helps")
    assert "lower_k" not in kinds(advise(AdviceInput("baseline", (c,))))


def test_p50_helping_and_p95_hurting_is_flagged_at_that_step_only() -> None:
    c = spec(steps=steps((1, 0.8), (4, 0.85), p95={1: 0.9, 4: 1.2}), status="always_helps")
    watch = only(advise(AdviceInput("baseline", (c,))), "watch_p95")
    assert "at 4 req/s: p50 is 15 % lower but p95 is 20 % higher" in watch.text


def test_gpu_memory_cost_is_reported_when_both_sides_were_sampled() -> None:
    c = spec(steps=steps((1, 0.8)), gpu_memory_peak_mib=131_000.0, status="always_helps")
    out = advise(AdviceInput("baseline", (c,), baseline_gpu_memory_peak_mib=120_000.0))
    assert "+11,000 MiB" in only(out, "memory").text
    assert "memory" not in kinds(advise(AdviceInput("baseline", (c,))))


def four_conditions(ttft: dict[str, float], tpot: dict[str, float]) -> AdviceInput:
    s = steps((1, 0.8))
    return AdviceInput(
        "baseline",
        (
            ConditionFigures(
                "prefix", False, True, steps=s, ttft_ratio=ttft["p"], tpot_ratio=tpot["p"]
            ),
            spec("spec", steps=s, ttft_ratio=ttft["s"], tpot_ratio=tpot["s"]),
            spec("both", prefix_caching=True, steps=s, ttft_ratio=ttft["b"], tpot_ratio=tpot["b"]),
        ),
    )


def test_four_conditions_attribute_ttft_to_prefix_caching_and_tpot_to_speculation() -> None:
    inp = four_conditions(
        ttft={"p": 0.55, "s": 1.03, "b": 0.57}, tpot={"p": 0.99, "s": 0.7, "b": 0.69}
    )
    lines = [a.text for a in advise(inp) if a.kind == "attribution"]
    assert len(lines) == 2
    assert lines[0].startswith("TTFT (prefill)") and "explained by prefix caching" in lines[0]
    assert lines[1].startswith("TPOT (decode)") and "explained by speculative decoding" in lines[1]


def test_attribution_follows_the_figures_not_the_usual_story() -> None:
    # Here speculation (say, a slow draft prefill) moved TTFT more than prefix caching did.
    inp = four_conditions(
        ttft={"p": 0.97, "s": 1.4, "b": 1.38}, tpot={"p": 1.0, "s": 1.0, "b": 1.0}
    )
    lines = [a.text for a in advise(inp) if a.kind == "attribution"]
    assert (
        "TTFT (prefill), with both on (38 % higher), is explained by speculative decoding"
        in (lines[0])
    )
    assert "did not change" in lines[1]


def test_attribution_needs_all_three_conditions() -> None:
    c = spec(steps=steps((1, 0.8)), ttft_ratio=0.9, tpot_ratio=0.8)
    assert "attribution" not in kinds(advise(AdviceInput("baseline", (c,))))
