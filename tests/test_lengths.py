"""Length distributions for synthetic prompts and outputs (``scenario/lengths.py``)."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import pytest

from specload.core.errors import ConfigError
from specload.scenario import parse_scenario
from specload.scenario.lengths import LengthDist, parse_length
from specload.scenario.prompts import build_prompt_set, estimate_tokens


def _fail(path: str, problem: str) -> ConfigError:
    return ConfigError(problem, file="s.yaml", path=path)


def _draws(spec: dict[str, Any], n: int = 5000) -> list[int]:
    _, d = parse_length(spec, "max_tokens", _fail)
    assert d is not None
    return [d.draw(7, "output", i) for i in range(n)]


def test_normal_draws_have_the_mean_and_stddev() -> None:
    x = _draws({"dist": "normal", "mean": 200, "stddev": 40})
    assert statistics.fmean(x) == pytest.approx(200, rel=0.02)
    assert statistics.pstdev(x) == pytest.approx(40, rel=0.05)


def test_lognormal_mean_is_the_arithmetic_mean_and_sigma_its_log_spread() -> None:
    x = _draws({"dist": "lognormal", "mean": 300, "sigma": 0.5, "max": 100_000})
    assert statistics.fmean(x) == pytest.approx(300, rel=0.03)
    assert statistics.pstdev([math.log(v) for v in x]) == pytest.approx(0.5, rel=0.05)


def test_uniform_covers_min_to_max_and_clipping_holds() -> None:
    x = _draws({"dist": "uniform", "min": 10, "max": 20})
    assert min(x) == 10 and max(x) == 20
    clipped = _draws({"dist": "normal", "mean": 100, "stddev": 80, "min": 50, "max": 150})
    assert min(clipped) == 50 and max(clipped) == 150


def test_draws_are_seeded_per_prompt() -> None:
    d = LengthDist("normal", 100, stddev=10, min=1, max=1000)
    assert [d.draw(1, "input", i) for i in range(5)] == [d.draw(1, "input", i) for i in range(5)]
    assert [d.draw(1, "input", i) for i in range(5)] != [d.draw(2, "input", i) for i in range(5)]
    assert parse_length(64, "max_tokens", _fail) == (64, None)


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"dist": "zipf", "mean": 3}, "max_tokens.dist", "expected one of fixed, uniform"),
        ({"dist": "normal", "mean": 3}, "max_tokens.stddev", "missing"),
        ({"dist": "lognormal", "mean": 3}, "max_tokens.sigma", "missing"),
        ({"dist": "uniform", "min": 3}, "max_tokens.max", "missing"),
        ({"dist": "normal", "mean": 3, "stddev": 1, "mu": 2}, "max_tokens.mu", "unknown key"),
        ({"dist": "normal", "mean": -3, "stddev": 1}, "max_tokens.mean", "expected a number >= 1"),
    ],
)
def test_bad_distributions_name_the_key(spec: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_scenario({"steps": [1], "max_tokens": spec}, file="s.yaml")
    assert str(exc.value).startswith(f"s.yaml: {path}: ") and words in str(exc.value)


def test_a_scenario_with_both_distributions_builds_prompts_of_the_drawn_lengths() -> None:
    raw = {
        "steps": [1],
        "seed": 3,
        "max_tokens": {"dist": "uniform", "min": 16, "max": 64},
        "prompts": {
            "synthetic": {
                "count": 40,
                "input_tokens": {"dist": "lognormal", "mean": 120, "sigma": 0.4, "min": 40},
            }
        },
    }
    sc = parse_scenario(raw, file="s.yaml")
    assert sc.max_tokens == 40 and sc.min_tokens == 64  # min follows each draw (clamped)
    assert parse_scenario(json.loads(json.dumps(sc.to_dict())), file="s.yaml") == sc
    prompts = build_prompt_set(sc, tokenize=estimate_tokens)  # a counter: exact lengths
    lengths = [p.expected_prompt_tokens for p in prompts]
    dist = sc.prompts.input_dist
    assert dist is not None
    assert lengths == [dist.draw(3, "input", i) for i in range(40)]
    assert len(set(lengths)) > 10 and prompts.exact and prompts.input_tokens is None
    caps = [p.max_tokens for p in prompts]
    assert all(c is not None and 16 <= c <= 64 for c in caps) and len(set(caps)) > 10
