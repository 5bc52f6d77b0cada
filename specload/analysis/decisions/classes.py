"""The answer per class of request: "ngram helps `code` up to 22 req/s and never helps `chat`".

Whether drafting pays depends on the content (code edits that repeat their input accept many
n-gram drafts; open-ended writing accepts few) and on the input length. One overall verdict
averages that away, so compare also answers per class, by the same rule: each class's records
are cut out of every run (``RunColumns`` restricted to the class) and go through the same
per-step statistics, ratios, classification and crossover as the whole.

Classes come from the records: a prompt file's ``category`` when the records carry one; else
a conversation's ``turn`` (``turn 1``, ``turn 2``, ...: later turns resend the history, which
is where prefix caching shortens TTFT); otherwise, when prompt lengths vary (max over min above ``LENGTH_SPREAD``), ``short`` and
``long``, split at the median prompt length of all runs, or, with the scenario's
``class_bounds: [512, 2048]``, ``<=512``, ``513-2048`` and ``>2048``. Fewer than two classes: no per-class
answer. The server's ``/metrics`` are not per class: a class's steps keep the step's server
figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.completeness import Incomplete

__all__ = ["LENGTH_SPREAD", "ClassAnswer", "class_masks", "restrict"]

#: Prompt lengths vary enough to split into short/long when max/min exceeds this.
LENGTH_SPREAD = 1.5


@dataclass(slots=True)
class ClassAnswer:
    """One class: how it was defined, its records, and the comparison restricted to it."""

    name: str
    #: ``category`` or ``input_length`` (short/long at the median)
    kind: str
    #: records per condition
    n: dict[str, int] = field(default_factory=dict)
    #: how the class was cut: the median prompt length for ``input_length``
    bounds: dict[str, float] = field(default_factory=dict)
    #: condition -> target QPS left out of the class's conclusions -> why
    incomplete: dict[str, dict[float, Incomplete]] = field(default_factory=dict)
    #: condition -> metric -> Crossover
    crossovers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: condition -> metric -> [RatioRow]
    ratios: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: condition -> [StepStats]
    steps: dict[str, list[Any]] = field(default_factory=dict)
    #: condition -> Capacity within the SLOs (``analysis.decisions.capacity``), when SLOs were given
    capacity: dict[str, Any] = field(default_factory=dict)


def _categories(runs: list[RunColumns]) -> list[str]:
    found: set[str] = set()
    for r in runs:
        col = r.cols.get("category")
        if col is not None:
            found |= {str(c) for c in col if c is not None}
    return sorted(found)


def _bounded(runs: list[RunColumns], bounds: tuple[int, ...]) -> dict[str, list[np.ndarray]]:
    edges = [0, *bounds]
    out = {}
    for i, lo in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else None
        name = f"<={hi}" if i == 0 else (f">{lo}" if hi is None else f"{lo + 1}-{hi}")
        out[name] = [
            np.asarray(
                (r.cols["prompt_tokens"] > lo)
                & (r.cols["prompt_tokens"] <= (hi if hi is not None else np.inf)),
                dtype=bool,
            )
            for r in runs
        ]
    return {k: v for k, v in out.items() if any(m.any() for m in v)}


def class_masks(
    runs: list[RunColumns], bounds: tuple[int, ...] = ()
) -> tuple[str, dict[str, float], dict[str, list[np.ndarray]]]:
    """``(kind, bounds, {class: [mask per run]})``; empty when there are fewer than two."""
    cats = _categories(runs)
    if len(cats) >= 2:
        masks = {c: [np.asarray(r.cols["category"] == c, dtype=bool) for r in runs] for c in cats}
        return "category", {}, masks
    turns = np.concatenate([r.cols["turn"] for r in runs]) if runs else np.array([])
    turns = turns[np.isfinite(turns)]
    if turns.size and turns.max() > 1:
        masks = {
            f"turn {t}": [np.asarray(r.cols["turn"] == t, dtype=bool) for r in runs]
            for t in sorted({int(x) for x in turns})
        }
        return "turn", {}, masks
    if bounds:
        masks = _bounded(runs, bounds)
        named = {f"bound_{i}": float(b) for i, b in enumerate(bounds)}
        return ("input_length", named, masks) if len(masks) >= 2 else ("", {}, {})
    lengths = np.concatenate([r.cols["prompt_tokens"] for r in runs]) if runs else np.array([])
    lengths = lengths[np.isfinite(lengths)]
    if lengths.size < 4 or lengths.min() <= 0 or lengths.max() / lengths.min() <= LENGTH_SPREAD:
        return "", {}, {}
    median = float(np.median(lengths))
    # a failed request has no prompt length: it is in neither class (NaN compares false)
    short = [np.asarray(r.cols["prompt_tokens"] <= median, dtype=bool) for r in runs]
    long = [np.asarray(r.cols["prompt_tokens"] > median, dtype=bool) for r in runs]
    return "input_length", {"median_prompt_tokens": median}, {"short": short, "long": long}


def restrict(run: RunColumns, mask: np.ndarray) -> RunColumns:
    """The run with only the records ``mask`` selects (steps and scrapes kept)."""
    return replace(run, cols={k: v[mask] for k, v in run.cols.items()}, warnings=[])
