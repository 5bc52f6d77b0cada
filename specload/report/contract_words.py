"""The output contract's issues in words: the one place that turns them into sentences.

``analysis/diagnostics/quality.py`` finds them as facts (``ContractIssue``: which check moved
and its figures); the findings, the verdict, the contract table and report.json's
``contract.issues`` all read ``contract_issue_text``, so every output says the same.
"""

from __future__ import annotations

from specload.analysis.diagnostics.quality import (
    ContractCheck,
    ContractIssue,
    FinishMixDiffers,
    LengthDiffers,
    OutputsDiffer,
    ShareDiffers,
)

__all__ = ["contract_issue_text", "contract_issues"]

#: Each share's name in the issue's sentence.
_SHARES = {"json_valid": "JSON valid", "tool_call": "tool-call"}


def contract_issue_text(issue: ContractIssue) -> str:
    """One way a condition's outputs break the baseline's contract, baseline → condition."""
    match issue:
        case FinishMixDiffers(shares=shares):
            mix = ", ".join(f"{k} {base:.0%}→{cond:.0%}" for k, base, cond in shares)
            return f"finish-reason mix differs ({mix})"
        case LengthDiffers(stat=stat, baseline=base, condition=cond):
            return f"output length {stat} {base:.1f}→{cond:.1f} tokens"
        case OutputsDiffer(exact_match=exact, compared=n, baseline_self_match=own):
            agrees = f"; the baseline agrees with itself {own:.1%}" if own is not None else ""
            return (
                f"exact match with the baseline {exact:.1%} over {n} outputs at temperature 0"
                f"{agrees}"
            )
        case ShareDiffers(share=share, baseline=base, condition=cond):
            return f"{_SHARES[share]} share {base:.1%}→{cond:.1%}"


def contract_issues(chk: ContractCheck) -> list[str]:
    """A condition's contract issues as sentences, in the order found (none: it passes)."""
    return [contract_issue_text(i) for i in chk.issues]
