"""Recommendation rules on constructed compare figures: each rule fires when, and only when, due."""

from __future__ import annotations

from specload.analysis.advise import (
    Advice,
    AdviceInput,
    ConditionFigures,
    StepFigures,
    advise,
)


def steps(
    *pairs: tuple[float, float], p95: dict[float, float] | None = None
) -> tuple[StepFigures, ...]:
    """Steps from (qps, p50 ratio); p95 ratio equal to p50 unless given."""
    p95 = p95 or {}
    return tuple(StepFigures(q, r, p95.get(q, r)) for q, r in pairs)


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


def kinds(advice: list[Advice]) -> list[str]:
    return [a.kind for a in advice]


def only(advice: list[Advice], kind: str) -> Advice:
    found = [a for a in advice if a.kind == kind]
    assert len(found) == 1, kinds(advice)
    return found[0]


def test_keep_on_up_to_the_crossover_below_the_operating_point() -> None:
    c = spec(
        steps=steps((1, 0.7), (4, 0.8), (16, 1.1)), crossover_qps=9.5, crossover_ci=(7.0, 12.0)
    )
    out = advise(AdviceInput(baseline="baseline", conditions=(c,), operating_qps=4.0))
    keep = only(out, "keep")
    assert "up to about 9.5 QPS" in keep.text and "95% CI 7-12" in keep.text
    assert "4 QPS, is below the crossover: keep it on" in keep.text
    assert keep.figures["crossover_qps"] == 9.5
    assert "off" not in kinds(out)


def test_operating_point_above_the_crossover_says_turn_it_off_there() -> None:
    c = spec(
        steps=steps((1, 0.7), (4, 0.8), (16, 1.1)), crossover_qps=9.5, crossover_ci=(7.0, 12.0)
    )
    keep = only(advise(AdviceInput("baseline", (c,), operating_qps=16.0)), "keep")
    assert "16 QPS, is above the crossover" in keep.text


def test_operating_point_inside_the_ci_is_too_close_to_call() -> None:
    c = spec(steps=steps((1, 0.7), (16, 1.1)), crossover_qps=9.5, crossover_ci=(7.0, 12.0))
    keep = only(advise(AdviceInput("baseline", (c,), operating_qps=10.0)), "keep")
    assert "too close to call" in keep.text


def test_missing_operating_point_is_said() -> None:
    c = spec(steps=steps((1, 0.7), (16, 1.1)), crossover_qps=9.5)
    keep = only(advise(AdviceInput("baseline", (c,))), "keep")
    assert "No operating point was given" in keep.text


def test_helping_at_every_step_reports_no_crossover_in_range() -> None:
    c = spec(steps=steps((1, 0.7), (2, 0.75), (4, 0.8)))
    keep = only(advise(AdviceInput("baseline", (c,), operating_qps=8.0)), "keep")
    assert "every tested load up to 4 QPS" in keep.text
    assert "above the tested range" in keep.text


def test_never_helping_says_turn_it_off_and_not_keep() -> None:
    c = spec(steps=steps((1, 0.99), (4, 1.05), (16, 1.3)))
    out = advise(AdviceInput("baseline", (c,)))
    off = only(out, "off")
    assert "never helped" in off.text and "best -1% at 1 QPS" in off.text
    assert "keep" not in kinds(out)


def test_improvement_inside_the_noise_band_does_not_count_as_help() -> None:
    # -1.5 % is within min_gain (2 %); a ratio whose CI crosses 1 does not count either.
    noisy = StepFigures(2, 0.9, 0.9, p50_ci=(0.8, 1.02))
    c = spec(steps=(StepFigures(1, 0.985, 0.985), noisy))
    assert kinds(advise(AdviceInput("baseline", (c,)))).count("off") == 1


def test_low_acceptance_says_turn_it_off() -> None:
    c = spec(acceptance_rate=0.12, per_position=(0.2, 0.1, 0.05, 0.01), steps=steps((1, 0.97)))
    out = advise(AdviceInput("baseline", (c,)))
    texts = [a.text for a in out if a.kind == "off"]
    assert any("only 12% of drafted tokens were accepted" in t for t in texts)


def test_good_acceptance_gives_no_low_acceptance_advice() -> None:
    c = spec(acceptance_rate=0.65, steps=steps((1, 0.7)))
    assert "off" not in kinds(advise(AdviceInput("baseline", (c,))))


def test_acceptance_falling_off_after_position_one_suggests_k_two() -> None:
    c = spec(per_position=(0.8, 0.45, 0.12, 0.05), steps=steps((1, 0.8)))
    lower = only(advise(AdviceInput("baseline", (c,))), "lower_k")
    assert "from 4 to 2" in lower.text and "after position 1" in lower.text
    assert lower.figures["suggested"] == 2.0


def test_steady_acceptance_keeps_k() -> None:
    c = spec(per_position=(0.9, 0.8, 0.7, 0.6), steps=steps((1, 0.8)))
    assert "lower_k" not in kinds(advise(AdviceInput("baseline", (c,))))


def test_p50_better_and_p95_worse_is_flagged_at_that_step_only() -> None:
    c = spec(steps=steps((1, 0.8), (4, 0.85), p95={1: 0.9, 4: 1.2}), crossover_qps=None)
    watch = only(advise(AdviceInput("baseline", (c,))), "watch_p95")
    assert "at 4 QPS" in watch.text and "-15%" in watch.text and "+20%" in watch.text


def test_gpu_memory_cost_is_reported_when_both_sides_were_sampled() -> None:
    c = spec(steps=steps((1, 0.8)), gpu_memory_peak_mib=131_000.0)
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
        "TTFT (prefill) change with both on (+38%) is explained by speculative decoding" in lines[0]
    )
    assert "did not change" in lines[1]


def test_attribution_needs_all_three_conditions() -> None:
    c = spec(steps=steps((1, 0.8)), ttft_ratio=0.9, tpot_ratio=0.8)
    assert "attribution" not in kinds(advise(AdviceInput("baseline", (c,))))
