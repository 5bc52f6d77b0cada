"""Can these runs be compared? Name every difference that would make a comparison unfair.

A speed difference means something only when the model, the prompts, the sampling, the
lengths and the server build are the same; only the server's speculative / prefix-caching
settings may differ. We compare each run with the first one: the target model, the
server version (when both report one), and the resolved scenario flattened to dotted key
paths, the measured median prompt length, ignoring keys that legitimately differ between runs of one comparison (the
scenario's file path and name, step list, durations, warm-up, repeats, scrape interval).
Runs sharing a label must also share a declared condition. The differences are returned
as lines, ``--force`` compares anyway and the report keeps the lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specload.analysis.load import RunData

__all__ = ["IGNORED_SCENARIO_KEYS", "differences", "flatten"]

#: Relative difference of median prompt length (tokens) beyond which runs are not comparable.
PROMPT_REL_MAX = 0.02
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


def _target(meta: dict[str, Any], key: str) -> Any:
    target = meta.get("target") or {}
    return target.get(key) if isinstance(target, dict) else None


def _pair(ref: RunData, run: RunData) -> list[str]:
    diffs = []
    name = f"{run.path} ({run.label}) vs {ref.path} ({ref.label})"
    for key in ("model", "server_version"):
        a, b = _target(ref.meta, key), _target(run.meta, key)
        if a is not None and b is not None and a != b:
            diffs.append(f"{name}: target.{key} {b!r} != {a!r}")
    fa, fb = flatten(ref.meta.get("scenario") or {}), flatten(run.meta.get("scenario") or {})
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key) != fb.get(key):
            diffs.append(f"{name}: scenario.{key} {fb.get(key)!r} != {fa.get(key)!r}")
    pa, pb = _median_prompt(ref), _median_prompt(run)
    if pa and pb and abs(pb / pa - 1) > PROMPT_REL_MAX:
        diffs.append(f"{name}: median prompt_tokens {pb:g} != {pa:g}")
    return diffs


def _median_prompt(run: RunData) -> float | None:
    x = run.cols["prompt_tokens"]
    x = x[~np.isnan(x)]
    return float(np.median(x)) if x.size else None


def differences(runs: list[RunData]) -> list[str]:
    """Every difference that makes ``runs`` not comparable; empty when they are."""
    diffs: list[str] = []
    for run in runs[1:]:
        diffs.extend(_pair(runs[0], run))
    by_label: dict[str, RunData] = {}
    for run in runs:
        first = by_label.setdefault(run.label, run)
        if (first.meta.get("condition") or {}) != (run.meta.get("condition") or {}):
            diffs.append(
                f"{run.path} and {first.path} share label {run.label!r} but declare different "
                f"conditions ({run.meta.get('condition')!r} vs {first.meta.get('condition')!r})"
            )
    return diffs
