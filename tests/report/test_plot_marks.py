"""Plots mark a boundary with its CI band only when the server starts agree at every step."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specload.analysis.comparison import Comparison
from specload.analysis.decisions.crossover import StartEffects
from specload.report.model import build_report


def _marks(cmp: Comparison, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from matplotlib.patches import Rectangle

    from specload.report import plots

    seen: dict[str, Any] = {}

    def capture(fig: Any) -> str:
        ax = fig.axes[0]
        data_top = max(
            (
                max(line.get_ydata(), default=0)
                for line in ax.get_lines()
                if line.get_marker() == "o"
            ),
            default=0,
        )
        seen[ax.get_title()] = {
            "labels": [t.get_text() for t in ax.texts],
            "bands": sum(isinstance(p, Rectangle) for p in ax.patches),
            "ylim": ax.get_ylim(),
            "data_top": data_top,
        }
        return "<svg/>"

    monkeypatch.setattr(plots, "_svg", capture)
    plots.render_plots(build_report(cmp))
    return seen


TPOT = "TPOT p50 / p95 vs load (95 % CI)"


def test_boundary_band_and_label(four_way: Comparison, monkeypatch: pytest.MonkeyPatch) -> None:
    cmp = copy.deepcopy(four_way)  # the fixture is shared
    assert cmp.metric == "tpot_p50"
    crossing = [x for x in cmp.crossovers if x.metric == cmp.metric and x.qps is not None]
    assert crossing, "the fixture has a condition that stops helping"
    decided = _marks(cmp, monkeypatch)[TPOT]
    assert decided["bands"] == len(crossing)
    assert all("starts disagree" not in t for t in decided["labels"])
    # labels sit above the data (the axis keeps headroom for them)
    lo, hi = decided["ylim"]
    assert decided["data_top"] <= lo + 0.85 * (hi - lo)

    for x in crossing:  # two starts analysed alone contradict at one step: no decision
        q = x.steps[-1]
        x.starts = [
            StartEffects("r1", x.status, {q: "hurts"}),
            StartEffects("r2", x.status, {q: "helps"}),
        ]
    undecided = _marks(cmp, monkeypatch)[TPOT]
    assert undecided["bands"] == 0  # no CI band for a boundary the verdict does not claim
    assert sum("starts\ndisagree" in t for t in undecided["labels"]) == len(crossing)
