"""The output contract: did a condition change *what* the server answers, not just how fast?

Speculative decoding is meant to be lossless, but precision, batching and bugs can still
change outputs. We judge by the contract, not by string equality alone: the finish-reason
mix, the output length distribution, the exact-match rate of output hashes for the same
prompt (meaningful only at temperature 0), JSON validity (the client's ``json_valid``, which
includes the scenario's required fields), and tool-call presence. Only successful requests,
warm-up included (the contract does not depend on load). Each check that moves by more than
its tolerance becomes an issue (``ContractIssue``, a fact with its figures:
``report/contract_words.py`` words it); a condition with no issues passes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from specload.analysis.inputs.run_columns import RunColumns
from specload.analysis.statistics.stats import quantile_sorted

__all__ = [
    "ContractCheck",
    "ContractIssue",
    "ContractSide",
    "FinishMixDiffers",
    "LengthDiffers",
    "OutputsDiffer",
    "ShareDiffers",
    "check_contract",
    "contract_side",
    "scenario_temperature",
]

#: Tolerances: finish-mix total variation, relative length change, exact match, shares.
FINISH_TVD_MAX = 0.02
LENGTH_REL_MAX = 0.05
EXACT_MIN = 0.99
SHARE_PP_MAX = 0.02


@dataclass(slots=True)
class ContractSide:
    """Output-contract figures of one condition (successful requests only)."""

    n: int
    finish_reasons: dict[str, float]
    output_tokens: dict[str, float]
    json_valid: float | None
    tool_call_share: float | None
    prompts: np.ndarray = field(repr=False, default_factory=lambda: np.array([], dtype=np.uint64))
    outputs: np.ndarray = field(repr=False, default_factory=lambda: np.array([], dtype=np.uint64))


@dataclass(frozen=True, slots=True)
class FinishMixDiffers:
    """The finish-reason mix moved by more than ``FINISH_TVD_MAX`` (total variation)."""

    #: (reason, baseline share, condition share) of every reason either side had, by name
    shares: tuple[tuple[str, float, float], ...]


@dataclass(frozen=True, slots=True)
class LengthDiffers:
    """The output length moved by more than ``LENGTH_REL_MAX``: at its p50, else its mean."""

    stat: Literal["p50", "mean"]
    baseline: float
    condition: float


@dataclass(frozen=True, slots=True)
class OutputsDiffer:
    """At temperature 0, fewer than ``EXACT_MIN`` of the outputs equal the baseline's most
    common output for the same prompt."""

    exact_match: float
    #: outputs whose prompt the baseline also answered
    compared: int
    #: how often the baseline's outputs equal their own most common one (None: unknown)
    baseline_self_match: float | None


@dataclass(frozen=True, slots=True)
class ShareDiffers:
    """The share of JSON-valid answers or of answers with tool calls moved by more than
    ``SHARE_PP_MAX``."""

    share: Literal["json_valid", "tool_call"]
    baseline: float
    condition: float


#: How a condition's outputs break the baseline's contract.
ContractIssue = FinishMixDiffers | LengthDiffers | OutputsDiffer | ShareDiffers


@dataclass(slots=True)
class ContractCheck:
    """One condition's contract against the baseline; ``issues`` empty means it passes."""

    condition: str
    baseline: str
    side: ContractSide
    base: ContractSide
    temperature: float | None
    exact_match: float | None
    compared: int
    baseline_self_match: float | None
    issues: list[ContractIssue]

    @property
    def passed(self) -> bool:
        return not self.issues


def scenario_temperature(scenario: Any) -> float | None:
    """The first ``temperature`` found in the resolved scenario dict, else None."""
    if isinstance(scenario, dict):
        if isinstance(scenario.get("temperature"), (int, float)):
            return float(scenario["temperature"])
        for v in scenario.values():
            t = scenario_temperature(v)
            if t is not None:
                return t
    return None


def contract_side(runs: list[RunColumns]) -> ContractSide:
    """Pool the successful records of a condition's runs."""
    fins: Counter[str] = Counter()
    lengths, jv, tools, prompts, outputs = [], [], [], [], []
    for run in runs:
        c, ok = run.cols, run.cols["ok"]
        names, counts = np.unique(c["finish_reason"][ok].astype(str), return_counts=True)
        fins.update(dict(zip(names.tolist(), counts.tolist(), strict=False)))
        lengths.append(c["output_tokens"][ok])
        jv.append(c["json_valid"][ok])
        tools.append(c["tool_calls"][ok])
        both = ok & (c["prompt_sha256"] != 0) & (c["output_sha256"] != 0)
        prompts.append(c["prompt_sha256"][both])
        outputs.append(c["output_sha256"][both])
    n = sum(fins.values())
    out_len = np.concatenate(lengths) if lengths else np.array([])
    out_len = out_len[~np.isnan(out_len)]
    j = np.concatenate(jv) if jv else np.array([], dtype=np.int8)
    j = j[j >= 0]
    t = np.concatenate(tools) if tools else np.array([])
    t = t[~np.isnan(t)]
    return ContractSide(
        n=n,
        finish_reasons={k: v / n for k, v in sorted(fins.items())} if n else {},
        output_tokens=_length_summary(np.sort(out_len)),
        json_valid=float(j.mean()) if j.size else None,
        tool_call_share=float((t > 0).mean()) if t.size else None,
        prompts=np.concatenate(prompts) if prompts else np.array([], dtype=np.uint64),
        outputs=np.concatenate(outputs) if outputs else np.array([], dtype=np.uint64),
    )


def _modes(prompts: np.ndarray, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per distinct prompt, its most common output; and how many outputs equal their mode."""
    order = np.lexsort((outputs, prompts))
    p, o = prompts[order], outputs[order]
    new = np.ones(p.size, dtype=bool)
    new[1:] = (p[1:] != p[:-1]) | (o[1:] != o[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, p.size))
    pair_p, pair_o = p[starts], o[starts]
    # Highest count first within each prompt, then take the first row of each prompt.
    rank = np.lexsort((-counts, pair_p))
    pair_p, pair_o, counts = pair_p[rank], pair_o[rank], counts[rank]
    first = np.ones(pair_p.size, dtype=bool)
    first[1:] = pair_p[1:] != pair_p[:-1]
    return pair_p[first], pair_o[first], int(counts[first].sum())


def _exact(side: ContractSide, base: ContractSide) -> tuple[float | None, int, float | None]:
    """Share of outputs equal to the baseline's most common output for the same prompt."""
    if base.prompts.size == 0:
        return None, 0, None
    mode_p, mode_o, self_match = _modes(base.prompts, base.outputs)
    idx = np.clip(np.searchsorted(mode_p, side.prompts), 0, mode_p.size - 1)
    known = mode_p[idx] == side.prompts
    total = int(known.sum())
    match = int((mode_o[idx][known] == side.outputs[known]).sum())
    return (match / total if total else None, total, self_match / base.prompts.size)


def _finish_mix(s: ContractSide, b: ContractSide) -> list[ContractIssue]:
    keys = sorted(set(s.finish_reasons) | set(b.finish_reasons))
    shares = tuple((k, b.finish_reasons.get(k, 0.0), s.finish_reasons.get(k, 0.0)) for k in keys)
    tvd = 0.5 * sum(abs(cond - base) for _, base, cond in shares)
    return [FinishMixDiffers(shares)] if tvd > FINISH_TVD_MAX else []


def _length(s: ContractSide, b: ContractSide) -> list[ContractIssue]:
    stats: tuple[Literal["p50", "mean"], ...] = ("p50", "mean")
    for stat in stats:
        sv, bv = s.output_tokens.get(stat), b.output_tokens.get(stat)
        if sv is not None and bv and abs(sv / bv - 1) > LENGTH_REL_MAX:
            return [LengthDiffers(stat, bv, sv)]
    return []


def _shares(s: ContractSide, b: ContractSide) -> list[ContractIssue]:
    pairs: tuple[tuple[Literal["json_valid", "tool_call"], float | None, float | None], ...] = (
        ("json_valid", s.json_valid, b.json_valid),
        ("tool_call", s.tool_call_share, b.tool_call_share),
    )
    return [
        ShareDiffers(name, bv, sv)
        for name, sv, bv in pairs
        if sv is not None and bv is not None and abs(sv - bv) > SHARE_PP_MAX
    ]


def _issues(chk: ContractCheck) -> list[ContractIssue]:
    """Each check beyond its tolerance: the finish mix, the length, the exact match (at
    temperature 0), the JSON-valid and tool-call shares, in that order."""
    out = _finish_mix(chk.side, chk.base) + _length(chk.side, chk.base)
    exact = chk.exact_match
    if exact is not None and exact < EXACT_MIN and (chk.temperature or 0) == 0:
        out.append(OutputsDiffer(exact, chk.compared, chk.baseline_self_match))
    return out + _shares(chk.side, chk.base)


def check_contract(
    condition: str, baseline: str, side: ContractSide, base: ContractSide, temperature: float | None
) -> ContractCheck:
    """Compare one condition's outputs to the baseline's (see module docstring)."""
    exact, compared, self_match = _exact(side, base)
    if temperature:  # sampling: equal hashes are not expected, so not measured
        exact, compared, self_match = None, 0, None
    chk = ContractCheck(
        condition, baseline, side, base, temperature, exact, compared, self_match, []
    )
    chk.issues = _issues(chk)
    return chk


def _length_summary(lengths: np.ndarray) -> dict[str, float]:
    """p5, p50, p95 and mean of sorted output lengths; empty without any."""
    qs = {f"p{round(q * 100)}": quantile_sorted(lengths, q) for q in (0.05, 0.50, 0.95)}
    out = {k: v for k, v in qs.items() if v is not None}
    return out | {"mean": float(lengths.mean())} if out else {}
