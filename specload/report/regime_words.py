"""The regime reading in words: one sentence per condition and step with two regimes, one
line per condition whose steps mostly have them, and what the telemetry shows in the slow
seconds.

``analysis/diagnostics/regimes.py`` finds the regimes and returns them as facts; the
terminal, report.md, report.html and report.json's sentences all come from here.
"""

from __future__ import annotations

from specload.analysis.diagnostics.regime_model import (
    CAUSE_GPU_IDLE,
    CAUSE_HOST_BOUND,
    CAUSE_LOADGEN,
    CAUSE_THROTTLED,
    HOST_POINTS,
    MIN_SEPARATION,
    MIN_SHARE,
    Regime,
    RegimeEffect,
    Regimes,
    RegimeSpread,
    RegimeTelemetry,
    StepKey,
)
from specload.report.wording import ms_text, signed_pct, step_name

__all__ = [
    "RULE",
    "cause_clause",
    "regime_sentence",
    "regime_sentences",
    "regime_step",
    "spread_line",
]

#: The rule in words, as the report states it under the regime sentences.
RULE = (
    "A step's per-second median engine steps (chunk gaps) are split in two where they "
    "separate best on a log scale; it has two regimes when each group holds at least "
    f"{MIN_SHARE * 100:.0f} % of its seconds and slow/fast >= {MIN_SEPARATION:g}."
)


def regime_step(key: StepKey) -> str:
    """A regime's step by its load (``wording.step_name``): "8 req/s" or "concurrency 8"."""
    kind, value = key
    return step_name(value) if kind == "qps" else step_name(0.0, int(value))


def cause_clause(t: RegimeTelemetry) -> str:
    """ "GPU busy 48 % vs 68 % then, clocks unchanged, host CPU 8.2 % vs 8.1 %: GPU idle
    between kernels at full clocks"; "host-bound" only where the host's counters show it."""
    busy = (
        f"GPU busy {t.gpu_util_slow_pct:.0f} % vs {t.gpu_util_fast_pct:.0f} % then"
        if t.gpu_util_slow_pct is not None and t.gpu_util_fast_pct is not None
        else "GPU busy not sampled"
    )
    if t.cause == CAUSE_LOADGEN:
        share = t.loadgen_share_slow or 0.0
        return (
            f"specload's own CPU at {share * 100:.0f} % of its cores then: load generator "
            "CPU-saturated (the slow seconds may be the client's)"
        )
    if t.cause == CAUSE_THROTTLED:
        return f"{busy}, {_clocks(t)}: GPU throttled"
    known = t.sm_clock_slow_mhz is not None and t.sm_clock_fast_mhz is not None
    clocks = "clocks unchanged" if known else "SM clock not sampled"
    if t.cause == CAUSE_HOST_BOUND:
        return f"{busy}, {clocks}, {_host(t)}: host-bound"
    if t.cause == CAUSE_GPU_IDLE:
        return f"{busy}, {clocks}, {_host(t)}: GPU idle between kernels at full clocks"
    return f"{busy}, {clocks}: cause not visible in the telemetry"


def _host(t: RegimeTelemetry) -> str:
    """The host's side of the slow seconds: its busy CPU (and steal, when it rose)."""
    slow, fast = t.host_busy_slow_pct, t.host_busy_fast_pct
    if slow is None or fast is None:
        return "host CPU not sampled"
    out = f"host CPU {slow:.1f} % vs {fast:.1f} %"
    if t.steal_slow_pct is not None and t.steal_fast_pct is not None:
        if t.steal_slow_pct - t.steal_fast_pct >= HOST_POINTS:
            out += f", steal {t.steal_slow_pct:.1f} % vs {t.steal_fast_pct:.1f} %"
    return out


def _clocks(t: RegimeTelemetry) -> str:
    parts = []
    if t.sm_clock_slow_mhz is not None and t.sm_clock_fast_mhz is not None:
        parts.append(f"SM clock {t.sm_clock_slow_mhz:.0f} vs {t.sm_clock_fast_mhz:.0f} MHz")
    if t.clock_events:
        parts.append("clock events " + ", ".join(t.clock_events))
    return "; ".join(parts) or "clocks dropped"


def _effect_clause(r: Regime, e: RegimeEffect) -> str:
    parts = []
    if e.fast_change is not None:
        parts.append(f"{signed_pct(e.fast_change)} in fast seconds")
    if e.slow_change is not None:
        parts.append(f"{signed_pct(e.slow_change)} in slow ones")
    head = f"p50 TPOT vs {e.baseline}: " + ", ".join(parts) if parts else ""
    if e.change is None:
        return head
    mix = f"{signed_pct(e.change)} at this host's {r.slow_share * 100:.0f} % slow share"
    return f"{head}; {mix}" if head else f"p50 TPOT vs {e.baseline}: {mix}"


def regime_sentence(r: Regime) -> str | None:
    """ "spec's engine step flipped between 13 and 20 ms at 8 req/s; 41 % of seconds slow; …";
    None for a step with one regime."""
    if not r.bimodal:
        return None
    parts = [
        f"{r.condition}'s engine step flipped between {ms_text(r.fast_ms)} and "
        f"{ms_text(r.slow_ms)} ms at {regime_step(r.key)}",
        f"{r.slow_share * 100:.0f} % of seconds slow",
    ]
    if r.telemetry is not None:
        parts.append(cause_clause(r.telemetry))
    if r.effect is not None and (clause := _effect_clause(r, r.effect)):
        parts.append(clause)
    if r.drift is not None:
        word = "slower" if r.drift > 0 else "faster"
        parts.append(f"its fast level also drifted ({abs(r.drift) * 100:.0f} % {word} by the end)")
    return "; ".join(parts)


def spread_line(s: RegimeSpread) -> str:
    """One line for a condition whose steps mostly have two regimes."""
    against = (
        f"its ratio to {s.baseline} depends" if s.condition != s.baseline else "its figures depend"
    )
    return (
        f"{s.condition}'s engine step had two regimes at {s.bimodal_steps} of {s.steps} steps "
        f"({s.slow_share_lo * 100:.0f}–{s.slow_share_hi * 100:.0f} % of seconds slow): at each "
        f"step {against} on how many of its seconds were slow on this host"
    )


def regime_sentences(regimes: Regimes) -> list[str]:
    """The spread lines, then one sentence per bimodal (condition, step)."""
    lines = [spread_line(s) for s in regimes.spread.values()]
    return lines + [s for r in regimes.bimodal() if (s := regime_sentence(r)) is not None]
