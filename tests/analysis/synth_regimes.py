"""Synthetic run dirs whose engine step follows a known function of time (regime tests).

``write_regime_run`` writes a run with ``synth_rundir.write_run`` and then rewrites each
successful record's chunk gaps: every chunk after the first arrives one engine step after
the previous one, the step being ``step_ms(t)`` at that moment (with 3 % noise), and carries
``tokens_per_chunk`` tokens (the extra tokens are the zeros of ``itl_s``, as vLLM's
multi-token chunks give). TTFT stays; E2E, TPOT, ``done_at``, chunks and output tokens
follow from the gaps, so TPOT and the chunk gaps agree as they do in a real run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from analysis.synth_rundir import SPEC, T0, Cond, write_run

StepMs = Callable[[float], float]

__all__ = [
    "BASE_MS",
    "FAST_MS",
    "SLOW_MS",
    "flat",
    "flipping",
    "regime_pair",
    "slow_at",
    "write_regime_run",
    "write_telemetry",
]

FAST_MS, SLOW_MS, BASE_MS = 13.0, 20.0, 6.5
#: Slow windows: seconds [5, 10) and [15, 20) of every 25 s after T0: 40 % slow.
PERIOD_S, SLOW_WINDOWS = 25.0, ((5.0, 10.0), (15.0, 20.0))


def slow_at(t: float) -> bool:
    """Whether the flipping truth is in its slow regime at unix time ``t``."""
    phase = (t - T0) % PERIOD_S
    return any(lo <= phase < hi for lo, hi in SLOW_WINDOWS)


def flipping(t: float) -> float:
    return SLOW_MS if slow_at(t) else FAST_MS


def flat(t: float) -> float:
    return BASE_MS


def _rewrite(rec: dict[str, Any], step_ms: StepMs, per_chunk: int, rng: Any) -> None:
    if not rec["ok"]:
        return
    chunks = rec["content_chunks"]
    t, itl = rec["first_token_at"], []
    for _ in range(chunks - 1):
        gap = step_ms(t) / 1000.0 * float(rng.lognormal(0.0, 0.03))
        t += gap
        itl += [gap] + [0.0] * (per_chunk - 1)
    out = 1 + len(itl)
    e2e = t - rec["sent_at"]
    rec.update(
        itl_s=itl,
        output_tokens=out,
        e2e_s=e2e,
        done_at=t,
        tpot_s=(e2e - rec["ttft_s"]) / (out - 1),
    )


def write_regime_run(
    path: Path,
    cond: Cond,
    step_ms: StepMs,
    *,
    tokens_per_chunk: int = 1,
    qps: tuple[float, ...] = (4.0, 8.0),
    seconds: float = 60.0,
    chunks: int = 60,
    seed: int = 0,
    block_every_s: float | None = None,
) -> Path:
    """A run of ``cond`` whose engine step is ``step_ms(t)``; ``seconds`` measured per step.

    ``block_every_s`` numbers the records' ``block`` by send time (an interleaved sweep's
    blocks), left out otherwise."""
    n = max(int(seconds * min(qps)), 10)
    write_run(path, cond, qps=qps, n=n, warm=8, seed=seed, out_tokens=chunks)
    rng = np.random.default_rng(seed + 17)
    lines = []
    for raw in (path / "requests.jsonl").read_bytes().splitlines():
        rec = orjson.loads(raw)
        rec["content_chunks"] = chunks if rec["ok"] else 0
        _rewrite(rec, step_ms, tokens_per_chunk, rng)
        if block_every_s is not None:
            rec["block"] = int((rec["sent_at"] - T0) // block_every_s)
        lines.append(orjson.dumps(rec))
    (path / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return path


def regime_pair(root: Path, **kw: Any) -> tuple[Path, Path]:
    """A flat baseline (6.5 ms steps, 1 token per chunk) and a flipping spec (13 / 20 ms,
    3 tokens per chunk): spec's TPOT is 4.3 ms in fast seconds, 6.7 ms in slow ones."""
    base = write_regime_run(root / "baseline", Cond("baseline"), flat, **kw)
    spec = write_regime_run(
        root / "spec",
        Cond("spec", speculative=SPEC, acceptance_rate=0.6),
        flipping,
        tokens_per_chunk=3,
        **kw,
    )
    return base, spec


def write_telemetry(
    run_dir: Path, second: Callable[[int, bool], tuple[dict[str, Any], dict[str, Any]]]
) -> None:
    """``telemetry.jsonl`` with one GPU and one host line per second of the run (two samples
    per second); ``second(t, slow)`` gives each second's (gpu fields, host fields)."""
    steps = orjson.loads((run_dir / "steps.json").read_bytes())
    lines = []
    for t in range(int(steps[0]["start"]), int(steps[-1]["end"]) + 1):
        gpu, host = second(t, slow_at(t + 0.5))
        for half in (0.0, 0.5):
            lines.append({"t": t + half, "source": "gpu", "gpu": 0, **gpu})
        lines.append({"t": t + 0.25, "source": "host", **host})
    (run_dir / "telemetry.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
