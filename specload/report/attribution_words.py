"""The four-way attribution in words: one line per latency family, each feature's change
against the baseline at every step and whether the combination adds up.

``analysis/decisions/attribution.py`` returns the ratios and the adds-up facts
(``Attribution``); the sentences are written here only, for the terminal, the reports and
report.json's ``attribution.summary``.
"""

from __future__ import annotations

from specload.analysis.decisions.attribution import ROLES, Attribution

__all__ = ["attribution_lines"]

#: Each family's name in the lines, with the phase it measures.
_FAMILY_WORDS = (("ttft", "TTFT (prefill)"), ("tpot", "TPOT (decode)"))


def _pct(r: float | None) -> str:
    """A ratio as a whole-percent change ("-25 %"); "n/a" when it is missing."""
    return "n/a" if r is None else f"{(r - 1) * 100:+.0f} %"


def _family_line(att: Attribution, family: str, what: str) -> str:
    """One family's line: "TPOT (decode) vs baseline at 2, 8 req/s: prefix +0 %, -0 %; spec
    -25 %, -25 %; both -25 %, -25 %; the combination adds up"."""
    parts = [
        f"{att.labels[role]} " + ", ".join(_pct(s.ratios[family][role].value) for s in att.steps)
        for role in ROLES
    ]
    qps = ", ".join(f"{s.target_qps:g}" for s in att.steps)
    adds = (
        "the combination adds up"
        if att.adds_up(family)
        else "the combination does NOT add up (the features interact)"
    )
    return f"{what} vs {att.labels['baseline']} at {qps} req/s: " + "; ".join([*parts, adds])


def attribution_lines(att: Attribution) -> list[str]:
    """The attribution's summary: a TTFT (prefill) line, then a TPOT (decode) line."""
    return [_family_line(att, family, what) for family, what in _FAMILY_WORDS]
