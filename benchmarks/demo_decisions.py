"""Does ``make demo`` decide? The demo run over seeds, and what it said about spec.

Each seed is one ``specload demo --seed N`` (the simulated hosts its server starts draw),
run as ``make demo`` runs it, into a scratch folder; from its report.json the verdict metric's
crossover for ``spec``: its status, whether it is decided (``Crossover.decided``: the steps
it rests on decided, the starts not contradicting each other) and each step's answer, and the
demo's wall time. Results: ``benchmarks/results/demo_decisions.md`` and ``.json``.

Usage: python benchmarks/demo_decisions.py [--seeds 10] [--parallel 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"


def one(seed: int, scratch: Path) -> dict[str, Any]:
    """One demo; what it decided about spec on p50 TPOT."""
    out = scratch / f"seed{seed}"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "specload", "demo", "--seed", str(seed), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    wall = time.monotonic() - t0
    try:
        report = json.loads((out / "report" / "report.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {"seed": seed, "exit": res.returncode, "wall_s": wall, "decided": False,
                "error": (res.stdout + res.stderr)[-500:]}  # fmt: skip
    x = report["crossover"]["spec"]["tpot_p50"]
    return {
        "seed": seed,
        "exit": res.returncode,
        "wall_s": round(wall, 1),
        "status": x["status"],
        "decided": bool(x["decided"]),
        "steps": {str(s["target_qps"]): s["effect"] for s in x["steps"]},
        "stop": (x.get("stops_at") or {}).get("qps"),
        "stop_ci": (x.get("stops_at") or {}).get("ci"),
        "verdict": report["verdict"]["spec"],
    }


def _loads(rows: list[dict[str, Any]]) -> list[str]:
    """The demo's steps, as report.json names them ("4.0" -> "4")."""
    steps = next((r["steps"] for r in rows if r.get("steps")), {})
    return [f"{float(q):g}" for q in steps]


def markdown(rows: list[dict[str, Any]], commit: str) -> str:
    decided = sum(r["decided"] for r in rows)
    lines = [
        "# Does `make demo` decide? (benchmarks/demo_decisions.py)",
        "",
        f"`specload demo --seed N` for {len(rows)} seeds at {commit}, on this project's "
        "2-core machine: the verdict metric's (p50 TPOT) answer for `spec`. **Decided in "
        f"{decided} of {len(rows)} seeds.** Decided: the status rests on decided steps "
        "(`Crossover.settled`) and no two server starts contradict each other.",
        "",
        f"| seed | decided | status | stop (CI) | {' / '.join(_loads(rows))} req/s | wall |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        steps = " / ".join((r.get("steps") or {}).values()) or r.get("error", "")[:60]
        ci = r.get("stop_ci") or [None, None]
        stop = f"{r['stop']:.1f} ({ci[0]}–{ci[1]})" if r.get("stop") is not None else "—"
        lines.append(
            f"| {r['seed']} | {'yes' if r['decided'] else 'no'} | {r.get('status', '—')} | "
            f"{stop} | {steps} | {r['wall_s']:.0f} s |"
        )
    lines += ["", "Verdicts:", ""] + [f"- seed {r['seed']}: {r.get('verdict', '')}" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--parallel", type=int, default=1, help="demos at once (each mostly waits)")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=False,
    ).stdout.strip()  # fmt: skip
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(a.parallel) as pool:
        rows = list(pool.map(lambda s: one(s, Path(tmp)), seeds))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "demo_decisions.json").write_text(json.dumps(rows, indent=2) + "\n")
    text = markdown(rows, commit)
    (a.out / "demo_decisions.md").write_text(text)
    print(text)
    return 0 if all(r["decided"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
