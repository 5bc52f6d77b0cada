"""Does one server alone drift over an H200 session, beyond the blocks' own spread?

``interleave.order: grouped`` runs a step's block pairs back to back, so each step sits in
one stretch of the session; ``spread`` spreads every step's pairs over the whole session.
Pairs are adjacent in both, so a drift that moves both servers cancels in each pair's ratio
either way. What grouped gives up is a drift of one server alone (the speculative server's
share of slow seconds growing over minutes, say): spread turns it into spread between a
step's pairs, grouped puts it into the step's ratio. This reads the four committed H200
sessions (``benchmarks/results/gpu-h200-interleaved/run-*.tar.gz``, all in the spread
order) and asks whether such a drift shows.

Per session: each block's p50 TPOT (measured successes), its time (its first measured send,
minutes from the session's first block), and its residual: the log of its p50 TPOT minus the
mean log of its step and condition in that session. A pair (a step's k-th block of each
condition, neighbours in time) has the residual of its log ratio, spec over baseline. Per
session and series: the least-squares slope of the residuals over time, per 10 minutes, with
its 95 % t interval, and the residuals' lag-1 autocorrelation in run order. A drift of one
server alone would show as a pair slope whose interval excludes 0; a drift of both as
condition slopes that do while the pair slope does not.

Usage: python benchmarks/session_drift.py  (writes results/session_drift.{md,json}; seconds)
"""

from __future__ import annotations

import json
import math
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from specload.analysis.statistics.stats import t975

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "benchmarks" / "results" / "gpu-h200-interleaved"
OUT = ROOT / "benchmarks" / "results"
Cell = tuple[int, float]  # (concurrency, target QPS)


def _blocks(run_dir: Path) -> list[dict[str, Any]]:
    """Each block of one condition: its cell, first measured send (unix s) and p50 TPOT."""
    by: dict[int, dict[str, Any]] = {}
    for line in (run_dir / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("warmup") or not r.get("ok") or r.get("tpot_s") is None:
            continue
        b = by.setdefault(
            int(r["block"]),
            {"cell": (int(r.get("concurrency") or 0), float(r["target_qps"])), "t": [], "tpot": []},
        )
        b["t"].append(float(r["sent_at"]))
        b["tpot"].append(float(r["tpot_s"]))
    return [
        {"block": n, "cell": b["cell"], "t": min(b["t"]), "log": math.log(np.median(b["tpot"]))}
        for n, b in sorted(by.items())
    ]


def _residuals(blocks: list[dict[str, Any]]) -> None:
    """Each block's log p50 TPOT minus its cell's mean in this condition (in place)."""
    cells: dict[Cell, list[float]] = {}
    for b in blocks:
        cells.setdefault(b["cell"], []).append(b["log"])
    for b in blocks:
        b["res"] = b["log"] - float(np.mean(cells[b["cell"]]))


def _pairs(base: list[dict[str, Any]], spec: list[dict[str, Any]]) -> list[dict[str, float]]:
    """A step's k-th block of each condition (in run order), their log ratio's residual."""
    out = []
    for cell in {b["cell"] for b in base}:
        bs = [b for b in base if b["cell"] == cell]
        ss = [s for s in spec if s["cell"] == cell]
        for b, s in zip(bs, ss, strict=False):
            out.append({"t": (b["t"] + s["t"]) / 2, "res": s["res"] - b["res"]})
    return sorted(out, key=lambda p: p["t"])


def _trend(points: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """Slope of the residuals over time (per 10 min) with its 95 % t interval; lag-1
    autocorrelation of the residuals in time order; the session's thirds' means."""
    pts = sorted(points, key=lambda p: p["t"])
    x = np.array([(p["t"] - t0) / 600.0 for p in pts])
    y = np.array([p["res"] for p in pts])
    n = len(y)
    slope, icept = np.polyfit(x, y, 1)
    resid = y - (slope * x + icept)
    se = math.sqrt(float(resid @ resid) / (n - 2) / float(((x - x.mean()) ** 2).sum()))
    half = t975(n - 2) * se
    thirds = np.array_split(y, 3)
    return {
        "n": n,
        "sd": float(y.std(ddof=1)),
        "slope_per_10min": float(slope),
        "ci": [float(slope - half), float(slope + half)],
        "excludes_0": bool(slope - half > 0 or slope + half < 0),
        "lag1": float(np.corrcoef(y[:-1], y[1:])[0, 1]),
        "thirds": [float(t.mean()) for t in thirds],
        "minutes": float(x.max() * 10),
    }


def _session(sweep: Path) -> dict[str, Any]:
    base, spec = _blocks(sweep / "baseline"), _blocks(sweep / "spec")
    _residuals(base)
    _residuals(spec)
    t0 = min(b["t"] for b in base + spec)
    return {
        "baseline": _trend(base, t0),
        "spec": _trend(spec, t0),
        "pairs": _trend(_pairs(base, spec), t0),
    }


def _pct(x: float) -> str:
    return f"{100 * (math.exp(x) - 1):+.1f} %"


def _markdown(result: dict[str, Any]) -> str:
    rows = []
    for name, s in result["sessions"].items():
        for series in ("baseline", "spec", "pairs"):
            r = s[series]
            rows.append(
                f"| {name} | {series} | {r['n']} | {r['minutes']:.1f} | {r['sd']:.3f} | "
                f"{_pct(r['slope_per_10min'])} ({_pct(r['ci'][0])}…{_pct(r['ci'][1])}) | "
                f"{'yes' if r['excludes_0'] else 'no'} | {r['lag1']:+.2f} | "
                + " / ".join(_pct(t) for t in r["thirds"])
                + " |"
            )
    drifted = [
        f"{name} {series}"
        for name, s in result["sessions"].items()
        for series in ("baseline", "spec", "pairs")
        if s[series]["excludes_0"]
    ]
    pairs_drift = [d for d in drifted if d.endswith("pairs")]
    return "\n".join(
        [
            "# Does one server alone drift over an H200 session? (`benchmarks/session_drift.py`)",
            "",
            "The four committed H200 interleaved sessions (all in the spread order). Per block:",
            "the log of its p50 TPOT minus its step's and condition's mean in that session;",
            "per pair (a step's k-th block of each condition, neighbours in time): the",
            "residual of spec's log ratio over the baseline. Slope: least squares over the",
            "session's minutes, as a change per 10 minutes, with its 95 % t interval. Thirds:",
            "the mean residual in each third of the session, in time order.",
            "",
            "| session | series | blocks or pairs | minutes | sd (log) | slope per 10 min (95 % CI) "
            "| CI excludes 0 | lag-1 | thirds |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            "Slopes whose interval excludes 0: "
            + (", ".join(drifted) if drifted else "none")
            + ". "
            + (
                "A pair slope among them: one server drifted alone there."
                if pairs_drift
                else "No pair slope excludes 0: where a drift showed, it moved both servers "
                "and cancelled in the pairs; no drift of one server alone showed beyond the "
                "blocks' own spread."
            ),
            "",
            "What this does not show: a drift smaller than these intervals (their half-widths "
            "are in the table), or one on another host. Four sessions of 10-17 minutes are "
            "what there is.",
            "",
        ]
    )


def main() -> None:
    tars = sorted(SESSIONS.glob("run-*.tar.gz"))
    sessions: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for t in tars:
            name = t.name.removesuffix(".tar.gz")
            with tarfile.open(t) as tf:
                tf.extractall(Path(tmp) / name, filter="data")
            sessions[name] = _session(Path(tmp) / name / "out" / "sweep")
    result = {"sessions": sessions}
    (OUT / "session_drift.json").write_text(json.dumps(result, indent=1) + "\n")
    text = _markdown(result)
    (OUT / "session_drift.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
