"""Can these runs be compared? Name every difference that would make a comparison unfair.

A speed difference means something only when the model, the prompts, the sampling, the
lengths and the server build are the same; only the server's speculative / prefix-caching
settings may differ. We compare each run with the first one: the target model, the
server version (when both report one), and the resolved scenario flattened to dotted key
paths, and the measured median prompt length, ignoring keys that legitimately differ between
runs of one comparison (the scenario's file path and name, step list, durations, warm-up,
repeats, scrape interval).

The median prompt length is taken per category (a prompt file's ``category``) and over the
steps every run has: a mix of 13-token questions and 150-token code edits has a median that
jumps from one to the other with the mix, and a run in progress (the web UI's live view holds
its settled steps only) sent the prompts of its first steps, not the whole run's. Like is
compared with like: the same class, the same steps.
Runs sharing a label must also share a declared condition. ``differences`` returns them as
facts (``ValueDiffers``, ``ConditionsDiffer``: each run against the first, full paths: what a
forced report keeps, worded by ``report/compare_words.py``); ``key_differences`` groups them
by key with every run's value, and ``not_comparable_message`` is the error a person reads:
one short line per key. ``scenario_differences`` is the scenario rule alone, on two run.json
scenarios: what the live comparison checks of its baseline before any traffic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specload.analysis.inputs.run_columns import RunColumns

__all__ = [
    "IGNORED_SCENARIO_KEYS",
    "ConditionsDiffer",
    "KeyDifference",
    "RunDifference",
    "ValueDiffers",
    "common_steps",
    "differences",
    "flatten",
    "key_differences",
    "not_comparable_message",
    "scenario_differences",
    "shown_value",
]

#: Relative difference of median prompt length (tokens) beyond which runs are not comparable.
PROMPT_REL_MAX = 0.02
#: Target keys compared (when both runs report them).
TARGET_KEYS = ("model", "server_version")
#: The key under which the median prompt length is compared (``PROMPT_KEY (category)`` per
#: category when the records carry one).
PROMPT_KEY = "median prompt_tokens"
#: Limits of one line of ``not_comparable_message``: characters of a value, of a run name,
#: values and run names shown per key, keys shown, characters of a line.
VALUE_CHARS, NAME_CHARS, MAX_VALUES, MAX_NAMES, MAX_KEYS, LINE_CHARS = 32, 24, 4, 3, 20, 160
#: Scenario leaf keys that may differ between comparable runs.
IGNORED_SCENARIO_KEYS = frozenset(
    {
        "path",
        "name",
        "description",
        "title",
        "steps",
        "duration_s",
        "step_duration_s",
        "duration",
        "warmup_s",
        "warmup",
        "repeats",
        "scrape_interval_s",
        "metrics_interval_s",
        "label",
        "run_dir",
        "out",
        "notes",
        "source",
        "record_itl",
        "request_timeout_s",
        "slo",  # the objective a run is judged by, not the traffic it sent
        "class_bounds",  # how compare groups requests, not the traffic
        "interleave",  # how the sweep orders the measured time, not the traffic
    }
)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """A nested dict as ``{"a.b.c": leaf}``; lists are leaves (compared whole)."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if str(k) in IGNORED_SCENARIO_KEYS:
                continue
            out.update(flatten(v, f"{prefix}{k}."))
    else:
        out[prefix.rstrip(".")] = obj
    return out


def scenario_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The scenario keys (dotted paths, sorted) in which two resolved scenarios differ, the
    keys that may differ (``IGNORED_SCENARIO_KEYS``) left out: what makes two runs
    incomparable, known from their run.json alone (the live comparison's baseline check)."""
    fa, fb = flatten(a), flatten(b)
    return [k.rstrip(".") for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def _target(target: dict[str, Any], key: str) -> Any:
    return target.get(key) if isinstance(target, dict) else None


def common_steps(runs: list[RunColumns]) -> set[int] | None:
    """The step indexes every run has records in; None (all records) when they share none."""
    sets = [{int(x) for x in r.cols["step"][np.isfinite(r.cols["step"])]} for r in runs]
    common = set.intersection(*sets) if sets else set()
    return common or None


def _median(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else None


def _median_prompts(run: RunColumns, steps: set[int] | None) -> dict[str, float | None]:
    """``{PROMPT_KEY: median}``, or one ``PROMPT_KEY (category)`` per category, over
    ``steps`` (None: every record)."""
    tokens = np.asarray(run.cols["prompt_tokens"], dtype=float)
    keep = np.ones(tokens.shape, dtype=bool)
    if steps is not None:
        keep = np.isin(run.cols["step"], sorted(steps))
    category = run.cols.get("category")
    names = {str(c) for c in category[keep] if c is not None} if category is not None else set()
    if not names:
        return {PROMPT_KEY: _median(tokens[keep])}
    assert category is not None
    return {f"{PROMPT_KEY} ({c})": _median(tokens[keep & (category == c)]) for c in sorted(names)}


def _values(run: RunColumns, steps: set[int] | None = None) -> dict[str, Any]:
    """Everything that must match, by key: target, flattened scenario, median prompt length
    (per category, over ``steps``)."""
    out: dict[str, Any] = {f"target.{k}": _target(run.meta.target, k) for k in TARGET_KEYS}
    scen = flatten(run.meta.scenario)
    out.update({f"scenario.{k}": v for k, v in scen.items()})
    out.update(_median_prompts(run, steps))
    return out


def _is_prompt_key(key: str) -> bool:
    return key == PROMPT_KEY or key.startswith(f"{PROMPT_KEY} (")


def _differs(key: str, a: Any, b: Any) -> bool:
    """Whether ``b`` (a run) differs from ``a`` (the reference run) in a way that matters."""
    if key.startswith("target."):  # a server without the endpoint reports None: unknown
        return a is not None and b is not None and a != b
    if _is_prompt_key(key):
        return bool(a and b and abs(b / a - 1) > PROMPT_REL_MAX)
    return bool(a != b)


def _keys(values: list[dict[str, Any]]) -> list[str]:
    """Target keys, then scenario keys sorted, then the prompt lengths: the order shown."""
    scen = sorted({k for v in values for k in v if k.startswith("scenario.")})
    prompts = sorted({k for v in values for k in v if _is_prompt_key(k)})
    return [*(f"target.{k}" for k in TARGET_KEYS), *scen, *prompts]


def shown_value(key: str, value: Any) -> str:
    """A value of ``key`` as the differences show it: a median prompt length as a number,
    anything else as its Python repr (a string quoted, a dict as written)."""
    return f"{value:g}" if _is_prompt_key(key) and value is not None else repr(value)


@dataclass(frozen=True, slots=True)
class ValueDiffers:
    """A run whose ``key`` (a target field, a scenario key, a median prompt length) differs
    from the first run's."""

    run: Path
    label: str
    first: Path
    first_label: str
    key: str
    value: Any
    first_value: Any


@dataclass(frozen=True, slots=True)
class ConditionsDiffer:
    """A run that shares its label with an earlier run (the first of that label) but declares
    another condition (run.json ``condition``)."""

    run: Path
    first: Path
    label: str
    condition: Any
    first_condition: Any


#: What makes runs not comparable, run against run.
RunDifference = ValueDiffers | ConditionsDiffer


def _pairs(runs: list[RunColumns]) -> list[RunDifference]:
    """Each run against the first, key by key."""
    steps = common_steps(runs)
    values = [_values(r, steps) for r in runs]
    keys = _keys(values)
    diffs: list[RunDifference] = []
    first = runs[0]
    for run, vals in zip(runs[1:], values[1:], strict=True):
        for key in keys:
            a, b = values[0].get(key), vals.get(key)
            if _differs(key, a, b):
                diffs.append(ValueDiffers(run.path, run.label, first.path, first.label, key, b, a))
    return diffs


def _condition_conflicts(runs: list[RunColumns]) -> list[tuple[RunColumns, RunColumns]]:
    """``(run, first run of its label)`` where runs sharing a label declare other conditions."""
    by_label: dict[str, RunColumns] = {}
    out = []
    for run in runs:
        first = by_label.setdefault(run.label, run)
        if first.meta.condition != run.meta.condition:
            out.append((run, first))
    return out


def differences(runs: list[RunColumns]) -> list[RunDifference]:
    """Every difference that makes ``runs`` not comparable; empty when they are.

    One per run and key, with full paths: the record kept in a forced report.
    ``not_comparable_message`` is the short form, per key, for a person to read.
    """
    return _pairs(runs) + [
        ConditionsDiffer(run.path, first.path, run.label, run.meta.condition, first.meta.condition)
        for run, first in _condition_conflicts(runs)
    ]


@dataclass(frozen=True, slots=True)
class KeyDifference:
    """One key that differs: ``values`` holds ``(run name, value)`` for every run involved."""

    key: str
    values: tuple[tuple[str, Any], ...]


def _run_names(runs: list[RunColumns]) -> list[str]:
    """The label, or ``label/dir`` where several runs share the label (pooled repeats)."""
    counts = Counter(r.label for r in runs)
    return [r.label if counts[r.label] == 1 else f"{r.label}/{r.path.name}" for r in runs]


def key_differences(runs: list[RunColumns]) -> list[KeyDifference]:
    """The differences of ``differences``, grouped by key, with every run's value."""
    names = _run_names(runs)
    steps = common_steps(runs)
    values = [_values(r, steps) for r in runs]
    out = []
    for key in _keys(values):
        ref = values[0].get(key)
        if any(_differs(key, ref, v.get(key)) for v in values[1:]):
            shown = tuple((n, v.get(key)) for n, v in zip(names, values, strict=True))
            out.append(KeyDifference(key, shown))
    for label in dict.fromkeys(run.label for run, _ in _condition_conflicts(runs)):
        group = [i for i, r in enumerate(runs) if r.label == label]
        conds = tuple((names[i], runs[i].meta.condition) for i in group)
        out.append(KeyDifference(f"condition of label {label!r}", conds))
    return out


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _format_line(diff: KeyDifference) -> str:
    """``key: value in run, run | value in run``: runs grouped by value, everything clipped."""
    groups: dict[str, list[str]] = {}
    for name, value in diff.values:
        groups.setdefault(_clip(shown_value(diff.key, value), VALUE_CHARS), []).append(name)
    parts = []
    for value, names in list(groups.items())[:MAX_VALUES]:
        more = f" +{len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else ""
        shown = ", ".join(_clip(n, NAME_CHARS) for n in names[:MAX_NAMES])
        parts.append(f"{value} in {shown}{more}")
    if len(groups) > MAX_VALUES:
        parts.append(f"+{len(groups) - MAX_VALUES} other values")
    return _clip(f"  {diff.key}: " + " | ".join(parts), LINE_CHARS)


def not_comparable_message(runs: list[RunColumns]) -> str:
    """The error for runs that are not comparable: one short line per differing key.

    Not one line per pairwise difference with full paths (a folder of runs would give
    thousands of characters): a person needs the keys and who has which value.
    """
    diffs = key_differences(runs)
    lines = [_format_line(d) for d in diffs[:MAX_KEYS]]
    if len(diffs) > MAX_KEYS:
        lines.append(f"  ... and {len(diffs) - MAX_KEYS} more keys (--force lists them all)")
    count = f"{len(diffs)} key differs" if len(diffs) == 1 else f"{len(diffs)} keys differ"
    head = f"runs are not comparable (use --force to compare anyway); {count}:"
    return "\n".join([head, *lines])
