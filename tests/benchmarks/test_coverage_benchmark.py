"""The coverage benchmark's machinery, shortened (``make test`` runs this; the full figures
come from ``python benchmarks/coverage.py`` and ``benchmarks/interleave.py``, committed).

One seed of the ``regime`` world on two steps: the virtual sessions become real run dirs
that compare's own analysis reads, the truth comes from long runs, and each one-start
design is scored against its own start's truth (what its CI claims; in this world, where
starts do not differ, the population's), with its new-start coverage beside it. No figure is asserted: those are the benchmark's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks import load_benchmark


def _load() -> Any:
    return load_benchmark("coverage.py")


@pytest.mark.slow
def test_short_coverage_run_compares_designs_against_a_truth(monkeypatch, tmp_path: Path) -> None:
    cov = _load()
    monkeypatch.setattr(cov, "CELLS", (cov.Cell(4.0), cov.Cell(12.0)))
    monkeypatch.setattr(cov, "STEP_S", 24.0)
    monkeypatch.setattr(cov, "WARMUP_S", 4.0)
    monkeypatch.setattr(cov, "TRUTH_STARTS", 2)
    monkeypatch.setattr(cov, "TRUTH_S", 60.0)
    monkeypatch.setattr(cov, "OWN_S", 60.0)
    monkeypatch.setattr(cov, "BOOTSTRAP", 200)
    result = cov.run(seeds=1, workers=1, worlds=["regime"], kinds=cov.KINDS)
    world = result["worlds"]["regime"]
    assert len(world["truth"]["ratios"]) == 2
    assert all(0.5 < r < 2.0 for r in world["truth"]["ratios"])
    designs = world["designs"]
    assert set(designs) == {"contiguous-1", "interleaved-1", "until-1"}
    # --until-decided: at least the session's server time, at most its budget and a round
    until = designs["until-1"]
    assert until["session_s"] <= until["server_s"] and sum(until["looks"].values()) == 1
    for i in range(2):
        contiguous = designs["contiguous-1"]["cells"][i]
        interleaved = designs["interleaved-1"]["cells"][i]
        for cell in (contiguous, interleaved):
            assert cell["coverage"] in (0.0, 1.0) and cell["population_coverage"] in (0.0, 1.0)
            assert cell["median_width"] > 0
        # starts do not differ in this world: each start's own truth, its steady state, is
        # the population's, not a shorter run's estimate of it
        assert contiguous["truth_p10_p90"] == [world["truth"]["ratios"][i]] * 2
    # what a checker reads: one start prints a CI about that start, not about a new one
    for name in designs:
        assert designs[name]["ci_printed"] and designs[name]["ci_claim"] == "same_start"
        assert designs[name]["min_coverage"] in (0.0, 1.0)
    text = cov.markdown(result)
    assert "| interleaved-1 |" in text and "Truth (2 starts x 60 s)" in text
    assert "· new start" in text and "Stop CIs" in text
    assert "until-1: server time" in text and "Steps decided" in text


def test_each_claim_is_what_the_design_prints() -> None:
    """The checker's form: several starts print a deciding CI about these starts (scored
    against their own truths), and from three the interval about this config beside it
    (scored against the population's); a design without CIs claims nothing."""
    cov = _load()
    cells = [{"median_width": None, "coverage": 0.0}] * 2
    assert cov._claim("contiguous-2", cells) == {
        "starts": 2, "ci_printed": False, "ci_claim": None, "min_coverage": None,
        "config_claim": None, "config_min_coverage": None}  # fmt: skip
    cells = [{"median_width": 0.3, "coverage": 0.95}, {"median_width": 0.2, "coverage": 0.9}]
    assert cov._claim("interleaved-2", cells)["ci_claim"] == "these_starts"
    assert cov._claim("interleaved-1", cells)["ci_claim"] == "same_start"
    config = {"coverage": 0.85, "covered": 17, "n": 20, "median_width": 0.5, "effects": {}}
    three = cov._claim("interleaved-3", [c | {"config": config} for c in cells])
    assert three["ci_claim"] == "these_starts" and three["min_coverage"] == 0.9
    assert (three["config_claim"], three["config_min_coverage"]) == ("new_start", 0.85)


def test_runs_of_one_world_merge_their_seeds() -> None:
    """Seeds run apart (``--first-seed``) pool into one summary: coverage over all of them."""
    cov = _load()

    def one_seed(covered: bool) -> dict[str, Any]:
        cell = {"covered": covered, "width": 0.2, "effect": "helps", "true_effect": "helps",
                "ratio": 0.8}  # fmt: skip
        return {"contiguous-3": {"cells": [cell] * len(cov.CELLS), "stop": None}}

    truth = {"ratios": [0.8] * len(cov.CELLS), "stop": None}
    runs = [
        {"seeds": 1, "cells": ["c"], "worlds": {"starts": {"truth": truth, "designs": {},
                                                          "per_seed": [one_seed(ok)]}}}
        for ok in (True, False)
    ]  # fmt: skip
    merged = cov.merge(runs)["worlds"]["starts"]
    design = merged["designs"]["contiguous-3"]
    assert design["seeds"] == 2 and len(merged["per_seed"]) == 2
    assert [c["coverage"] for c in design["cells"]] == [0.5] * len(cov.CELLS)
    assert design["min_coverage"] == 0.5 and design["ci_claim"] == "these_starts"
    # a later run that measured another design too: each design counts its own seeds
    both = one_seed(True) | {"interleaved-1": one_seed(False)["contiguous-3"]}
    runs.append(
        runs[0] | {"worlds": {"starts": runs[0]["worlds"]["starts"] | {"per_seed": [both]}}}
    )
    merged = cov.merge(runs)["worlds"]["starts"]["designs"]
    assert merged["contiguous-3"]["seeds"] == 3 and merged["interleaved-1"]["seeds"] == 1
    assert merged["interleaved-1"]["min_coverage"] == 0.0


def test_each_window_draws_its_own_accepted_drafts() -> None:
    """A fresh engine per window must not replay one acceptance sequence: on a host with no
    regime and no jitter, two windows at different session times differ only by those
    draws, so their TPOTs must differ (with the engine's default seed they were equal)."""
    cov = _load()
    flat = cov.World("flat", regime=False, starts_differ=False)
    one = cov.Cell(0.0, 1)
    a, b = (cov._window(flat, "spec", 1, one, t0, 0.0, 4.0) for t0 in (0.0, 100.0))
    ta = [r.tpot_s for r in a.results[:5]]
    tb = [r.tpot_s for r in b.results[:5]]
    assert len(ta) == len(tb) == 5
    assert any(abs(x - y) > 1e-6 * x for x, y in zip(ta, tb, strict=True))  # not float noise
