"""Side-by-side output samples: the same prompt's output under the baseline and a condition.

The seed protocol asks for a human check of meaning ("send the same questions several
times, compare facts and length side by side"): exact-match rates say *whether* outputs
changed, a person has to read *how*. Text exists only in runs made with ``--store-text``;
without it there is nothing to show and this returns nothing (never a guess). Only the
first record of each run is inspected to decide, so runs without text cost one line read.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["OutputSample", "diff_segments", "output_samples"]

PROMPT_CHARS = 400  #: how much of a prompt the report shows (its end: where it asks)


@dataclass(frozen=True, slots=True)
class OutputSample:
    """One prompt answered by the baseline and by the condition (temperature as scenario)."""

    prompt_sha256: str
    prompt_tail: str
    baseline_text: str
    condition_text: str

    @property
    def identical(self) -> bool:
        return self.baseline_text == self.condition_text


def _texts(run_dir: Path) -> dict[str, tuple[str, str]]:
    """``{prompt_sha256: (prompt_text, output_text)}`` of the first ok record per prompt."""
    path = run_dir / "requests.jsonl"
    out: dict[str, tuple[str, str]] = {}
    if not path.exists():
        return out
    with path.open("rb") as fh:
        for i, line in enumerate(fh):
            try:
                rec: dict[str, Any] = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a partial trailing line: the loader reports it
            if "output_text" not in rec:
                if i == 0:
                    return out  # run made without --store-text: no text anywhere
                continue
            key = rec.get("prompt_sha256")
            if rec.get("ok") and key and key not in out and not rec.get("warmup"):
                out[key] = (rec.get("prompt_text") or "", rec.get("output_text") or "")
    return out


def output_samples(
    base_dirs: list[Path], cond_dirs: list[Path], limit: int = 5
) -> list[OutputSample]:
    """Up to ``limit`` prompts answered in both conditions, differing outputs first."""
    base: dict[str, tuple[str, str]] = {}
    for d in base_dirs:
        base = {**_texts(d), **base}
    if not base:
        return []
    cond: dict[str, tuple[str, str]] = {}
    for d in cond_dirs:
        cond = {**_texts(d), **cond}
    shared = [k for k in base if k in cond]
    samples = [OutputSample(k, base[k][0][-PROMPT_CHARS:], base[k][1], cond[k][1]) for k in shared]
    samples.sort(key=lambda s: s.identical)  # differences are what a person must read
    return samples[:limit]


def diff_segments(a: str, b: str) -> list[tuple[str, str, str]]:
    """Word-level diff as ``(op, a_part, b_part)`` with op ``equal|replace|delete|insert``."""
    wa, wb = a.split(" "), b.split(" ")
    ops = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes()
    return [(op, " ".join(wa[i1:i2]), " ".join(wb[j1:j2])) for op, i1, i2, j1, j2 in ops]
