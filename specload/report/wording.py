"""How figures read: changes as "16 % lower", CIs rounded like their point estimates.

The verdict, the recommendations, the gates, the flags and the tables all quote changes
against the baseline. Written once here so that they read alike and never say "improves
−4 %" or "worsens +0 %", and a CI is never printed with more digits than its estimate
("16.7022–17.7541"). The analysis returns figures and never imports these; the sweep's
progress lines and the web UI (``protocol/``, ``locust/``) name steps and changes with them
too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "Interval",
    "change_words",
    "digits_for",
    "load_ci_text",
    "load_decimals",
    "load_range",
    "load_with_ci",
    "ms_text",
    "pct",
    "pct_ci_text",
    "signed_change",
    "signed_pct",
    "step_label",
    "step_name",
    "time_text",
    "to_decide_text",
]


class Interval(Protocol):
    """A point with its CI, as the words read it (``statistics.stats.Estimate`` is one): a
    Protocol, so that the words import nothing of the analysis they word."""

    @property
    def value(self) -> float | None: ...
    @property
    def lo(self) -> float | None: ...
    @property
    def hi(self) -> float | None: ...


def to_decide_text(undecided: Sequence[tuple[float | str, float | None]]) -> str:
    """Undecided steps and how long would likely decide them (``effect.to_decide_s`` per
    step, measured time both sides together): "undecided at 4, 12 req/s; about 9 min more
    measurement there would likely decide them". A step is its QPS, or a label ("c=1").
    The one wording for verdict, advice, the sweep's looks and the web UI."""
    if not undecided:
        return ""
    steps = [q for q, _ in undecided]
    if all(isinstance(q, (int, float)) for q in steps):
        where = ", ".join(f"{q:g}" for q in steps) + " req/s"
    else:
        where = ", ".join(q if isinstance(q, str) else f"{q:g} req/s" for q in steps)
    them = "it" if len(undecided) == 1 else "them"
    known = [s for _, s in undecided if s is not None]
    if len(known) < len(undecided):
        return (
            f"undecided at {where}; how long would decide {them} cannot be said "
            "(an estimate sits on a line it must clear)"
        )
    if sum(known) > A_DAY_S:  # "470.7 h" would be precision the forecast does not have
        return (
            f"undecided at {where}; more than a day of measurement there would be needed to "
            f"decide {them} at the spread measured"
        )
    return (
        f"undecided at {where}; about {time_text(sum(known))} more measurement there "
        f"would likely decide {them}"
    )


#: Past this, how long would decide a step is no plan anyone makes: the words say so.
A_DAY_S = 24 * 3600.0


def time_text(seconds: float) -> str:
    """A measuring time as people plan it: "40 s", "9 min", "2.5 h"."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 10 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 3600:.0f} h"


def digits_for(fraction: float) -> int:
    """Decimals for a percentage: none from 1 % up, one below (0.4 %), as people round."""
    return 0 if abs(fraction) >= 0.0095 else 1


def pct(fraction: float, digits: int | None = None) -> str:
    """``0.156`` → ``"16"`` (magnitude, no sign, no unit)."""
    d = digits_for(fraction) if digits is None else digits
    return f"{abs(fraction) * 100:.{d}f}"


def change_words(ratio: Interval, *, ci: bool = True) -> str:
    """A condition / baseline ratio in words: "16 % lower (CI 12–18 %)", "6 % higher (CI
    2–10 %)", "7 % lower (CI from 10 % lower to 7 % higher)", "no different (CI ±2 %)".
    """
    v = ratio.value
    if v is None:
        return "not measured"
    d = digits_for(1.0 - v)
    word = "lower" if v < 1.0 else "higher"
    head = f"{pct(1.0 - v, d)} % {word}" if round(abs(1.0 - v) * 100, d) else "no different"
    if not ci or ratio.lo is None or ratio.hi is None:
        return head
    lo, hi = ratio.lo, ratio.hi  # ratios: lo is the most favourable end
    if hi < 1.0:  # lower throughout: as gains, smallest to largest
        return f"{head} (CI {pct(1.0 - hi, d)}–{pct(1.0 - lo, d)} %)"
    if lo > 1.0:
        return f"{head} (CI {pct(lo - 1.0, d)}–{pct(hi - 1.0, d)} %)"
    return f"{head} (CI from {pct(1.0 - lo, d)} % lower to {pct(hi - 1.0, d)} % higher)"


def ms_text(ms: float | None) -> str:
    """Milliseconds as the sentences quote them: "13" from 10 ms on, "6.2" below; "?"."""
    if ms is None:
        return "?"
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}"


def signed_pct(change: float | None, digits: int = 0) -> str:
    """A relative change, signed: ``-0.156`` → "-16 %" ("?" when unknown), for clauses
    that list several side by side ("+16 % in fast seconds, -4 % in slow ones")."""
    return "?" if change is None else f"{change * 100:+.{digits}f} %"


def signed_change(ratio: Interval, digits: int = 1) -> str:
    """A ratio as a signed change for tables: "-15.6 % (-18.3…-12.0)"; "—" without data."""
    if ratio.value is None:
        return "—"
    point = signed_pct(ratio.value - 1, digits)
    if ratio.lo is None or ratio.hi is None:
        return point
    return f"{point} ({(ratio.lo - 1) * 100:+.{digits}f}…{(ratio.hi - 1) * 100:+.{digits}f})"


def pct_ci_text(
    ci: tuple[float | None, float | None], beyond: tuple[str, str] = ("", ""), digits: int = 1
) -> str:
    """A CI of a signed change in percent, "+4.3…+5.8"; "" without both bounds. A bound the
    bootstrap left open beyond what the tested range can measure (``beyond`` "below" /
    "above", as ``crossover.boundary_ci`` says) reads "<-48" / ">+12": the true bound lies
    further out than the figure, as a boundary's ">24" does."""
    if ci[0] is None or ci[1] is None:
        return ""
    mark = {"below": "<", "above": ">"}
    return "…".join(
        f"{mark.get(side, '')}{v:+.{digits}f}" for v, side in zip(ci, beyond, strict=True)
    )


def load_decimals(point: float) -> int:
    """Decimals for a load in req/s: one from 1 req/s up (17.6, 8.0), two below (0.85)."""
    return 1 if abs(point) >= 1 else 2


def step_name(target_qps: float, concurrency: int = 0, *, short: bool = False) -> str:
    """A step by what it asks for: "8 req/s" (open loop) or "concurrency 8" (closed loop,
    ``{concurrency: 8}``); ``short`` gives "c=8" where steps are listed side by side (the
    sweep's progress lines, the web UI's table)."""
    if concurrency:
        return f"c={concurrency}" if short else f"concurrency {concurrency}"
    return f"{target_qps:g} req/s"


def step_label(target_qps: float, achieved_qps: float | None) -> str:
    """A load step as the human reports name it: the nominal rate, with the achieved rate
    beside it where the two differ at the shown precision ("16 (17.1)", "1 (0.80)", "8"):
    a reader must not take the nominal 16 req/s for the 17.1 the server actually carried."""
    nominal = f"{target_qps:g}"
    if achieved_qps is None:
        return nominal
    decimals = load_decimals(achieved_qps)
    shown = f"{achieved_qps:.{decimals}f}"
    return nominal if shown == f"{target_qps:.{decimals}f}" else f"{nominal} ({shown})"


def load_with_ci(point: float, lo: float | None, hi: float | None) -> tuple[str, str, str]:
    """A load (req/s) and its CI bounds as text, all rounded alike (``load_decimals``):
    17.6 (17.1–18.2), 9.5 (8.3–16.0), 0.85 (0.61–1.30); "?" for a missing bound."""
    decimals = load_decimals(point)
    text = f"{point:.{decimals}f}"

    def bound(v: float | None) -> str:
        return "?" if v is None else f"{v:.{decimals}f}"

    return text, bound(lo), bound(hi)


def load_ci_text(
    ci: tuple[float | None, float | None],
    beyond: tuple[str, str],
    tested_range: tuple[float, float],
) -> str:
    """A boundary's CI as text, the one form the verdict, tables and advice share: "8–16",
    "<2–4", ">32–>32". Its bounds are tested steps (``crossover.bracket``), named as the
    steps are ("8", not "8.0"). A missing bound beyond the tested range (``beyond``
    "above"/"below") shows as ">hi"/"<lo", else "?"."""
    parts = []
    for v, side in zip(ci, beyond, strict=True):
        if v is not None:
            parts.append(f"{v:g}")
        elif side == "above":
            parts.append(f">{tested_range[1]:g}")
        elif side == "below":
            parts.append(f"<{tested_range[0]:g}")
        else:
            parts.append("?")
    return "–".join(parts)


def load_range(lo: float, hi: float) -> str:
    """A tested range of loads: "4–16 req/s", or "4 req/s" for one step (not "4–4")."""
    return f"{lo:g} req/s" if lo == hi else f"{lo:g}–{hi:g} req/s"


def metric_label(metric: str) -> str:
    """``tpot_p95`` → ``p95 TPOT``."""
    fam, _, tag = metric.rpartition("_")
    name = "queue delay" if fam == "queue_delay" else fam.upper()
    return f"{tag} {name}"
