"""Do two (or more) interleaved sessions give the same answer, step by step?

Each session is the GPU kit's output (``run.sh`` MODE=interleaved): a folder or a
``.tar.gz`` holding ``out/sweep/{baseline,spec}``. Every session is compared by specload
itself (``specload compare``, today's code, so old and new sessions are judged alike), and
the table puts the sessions' per-step changes side by side:

- the change of each metric with its 95 % CI and the effect by the report's one rule
  (``effect`` in report.json: helps / hurts / same / undecided; ``no_change`` in reports of
  schema ``specload.report/1``);
- **agree**: every session has the same effect at that step (the rule issue "Intervals that
  mean what they say" asks for: labels per step, not a status over all steps);
- **inside**: every session's estimate lies inside every other session's CI;
- each condition's engine step per second (``regimes``: fast and slow level, slow share, GPU
  busy and the change in each), since the regime is what moves a step's ratio between
  sessions.

    python benchmarks/gpu/sessions_table.py \\
        benchmarks/results/gpu-h200-interleaved/run-1.tar.gz \\
        benchmarks/results/gpu-h200-interleaved/run-2.tar.gz \\
        --out benchmarks/results/gpu-h200-interleaved/agreement.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specload.recorder.run_json import load_run_json

METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "e2e_p50")
EFFECT_WORDS = {
    "helps": "helps",
    "hurts": "hurts",
    "no_change": "no sig.",
    "undecided": "undecided",
}


@dataclass(frozen=True)
class Cell:
    """One session's change at one step: ratio, CI, effect by the report's rule."""

    value: float
    lo: float | None
    hi: float | None
    effect: str

    def text(self) -> str:
        pct = (self.value - 1) * 100
        ci = (
            ""
            if self.lo is None or self.hi is None
            else f" ({(self.lo - 1) * 100:+.1f}…{(self.hi - 1) * 100:+.1f})"
        )
        return f"{pct:+.1f} %{ci} {EFFECT_WORDS.get(self.effect, self.effect)}"

    def inside(self, other: Cell) -> bool:
        return other.lo is not None and other.hi is not None and other.lo <= self.value <= other.hi


def sweep_dir(src: Path, scratch: Path) -> Path:
    """The session's ``sweep`` folder: as it is, or unpacked from its archive."""
    if src.is_dir():
        for cand in (src / "out" / "sweep", src / "sweep", src):
            if (cand / "baseline" / "run.json").exists():
                return cand
        raise SystemExit(f"sessions_table: {src}: no sweep/baseline/run.json inside")
    dest = scratch / src.name.replace(".tar.gz", "")
    with tarfile.open(src) as tar:
        tar.extractall(dest, filter="data")
    return sweep_dir(dest, scratch)


def compare(sweep: Path, scratch: Path) -> dict[str, Any]:
    """report.json of ``specload compare`` over the session's two run dirs."""
    out = scratch / f"report-{sweep.parent.parent.name}"
    runs = [str(sweep / "baseline"), str(sweep / "spec")]
    cmd = [sys.executable, "-m", "specload", "compare", *runs, "--out", str(out), "--quiet"]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    path = out / "report.json"
    if not path.exists():
        raise SystemExit(f"sessions_table: specload compare wrote no report for {sweep}")
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def cells(report: dict[str, Any], metric: str) -> dict[str, Cell]:
    """Step label -> the spec condition's change at it (closed-loop steps first)."""
    out: dict[str, Cell] = {}
    for block in report.get("closed_loop") or []:
        r = block["ratios"]["spec"].get(metric)
        if r:
            out[f"c={block['concurrency']}"] = Cell(r["value"], r["lo"], r["hi"], r["effect"])
    for r in report["ratios"]["spec"].get(metric, []):
        out[f"{r['target_qps']:g} req/s"] = Cell(r["value"], r["lo"], r["hi"], r["effect"])
    return out


def _step_label(reg: dict[str, Any]) -> str:
    return f"c={reg['concurrency']}" if reg.get("concurrency") else f"{reg['target_qps']:g} req/s"


def regimes(report: dict[str, Any], condition: str = "spec") -> dict[str, dict[str, Any]]:
    """Step label -> the condition's regime reading at that step (report.json ``regimes``)."""
    return {_step_label(r): r for r in (report.get("regimes") or {}).get(condition, {}).values()}


def _regime_cell(reg: dict[str, Any] | None) -> str:
    """'13.0 / 20.0 ms, 40 % slow, GPU 65 / 46 %, -21 / +16 %' (fast / slow), or one level."""
    if reg is None:
        return "—"
    if not reg.get("bimodal"):
        return f"{reg['fast_ms']:.1f} ms, one regime" if reg.get("fast_ms") else "—"
    text = f"{reg['fast_ms']:.1f} / {reg['slow_ms']:.1f} ms, {reg['slow_share'] * 100:.0f} % slow"
    tel = reg.get("telemetry") or {}
    if tel.get("gpu_util_fast_pct") is not None and tel.get("gpu_util_slow_pct") is not None:
        text += f", GPU {tel['gpu_util_fast_pct']:.0f} / {tel['gpu_util_slow_pct']:.0f} %"
    eff = reg.get("effect") or {}
    if eff.get("fast_change") is not None and eff.get("slow_change") is not None:
        text += f", p50 TPOT {eff['fast_change'] * 100:+.0f} / {eff['slow_change'] * 100:+.0f} %"
    return text


def table(names: list[str], reports: list[dict[str, Any]], metric: str) -> list[str]:
    """One markdown table: per step, each session's change, agree, inside."""
    per = [cells(r, metric) for r in reports]
    head = "| step | " + " | ".join(names) + " | agree | inside |"
    lines = [f"#### {metric}", "", head, "|" + "---|" * (len(names) + 3)]
    for step in per[0]:
        row = [p.get(step) for p in per]
        if any(c is None for c in row):
            continue
        got = [c for c in row if c is not None]
        agree = len({c.effect for c in got}) == 1
        inside = all(a.inside(b) for a in got for b in got if a is not b)
        cols = " | ".join(c.text() for c in got)
        lines.append(
            f"| {step} | {cols} | {'yes' if agree else '**no**'} | {'yes' if inside else 'no'} |"
        )
    return [*lines, ""]


def regime_table(names: list[str], reports: list[dict[str, Any]]) -> list[str]:
    """Per step and condition: each session's regime reading (today's rule)."""
    lines = [
        "#### Engine step per second: fast / slow level, slow share, GPU busy fast / slow, "
        "p50 TPOT vs baseline in fast / slow seconds",
        "",
        "| step | condition | " + " | ".join(names) + " |",
        "|" + "---|" * (len(names) + 2),
    ]
    for cond in ("baseline", "spec"):
        per = [regimes(r, cond) for r in reports]
        for step in per[0]:
            cells = " | ".join(_regime_cell(p.get(step)) for p in per)
            lines.append(f"| {step} | {cond} | {cells} |")
    return [*lines, ""]


def _blocks_run(run_dir: Path) -> int:
    """Blocks this condition started: one header per block in the merged blocks.log of a
    sweep of one ``specload run`` per block; the distinct ``block`` of its records in a
    single-run sweep (which writes no blocks.log)."""
    log = run_dir / "blocks.log"
    if log.exists():
        return log.read_text().count("===== block")
    with (run_dir / "requests.jsonl").open() as f:
        return len({json.loads(line).get("block") for line in f if line.strip()})


def plan_words(plan: dict[str, Any]) -> str:
    """A session's block plan in words; ``block_warmup_s`` None is the default, a warm-up
    derived from each cell's p50 E2E."""
    warm = plan["block_warmup_s"]
    after = "warm-ups derived from each cell's p50 E2E" if warm is None else f"{warm:g} s warm-up"
    return f"order seed {plan['seed']}, {plan['block_s']:g} s blocks after {after}"


def blocks_line(names: list[str], sweeps: list[Path]) -> str:
    parts = []
    for name, sweep in zip(names, sweeps, strict=True):
        plan = load_run_json(sweep / "spec")["interleave"]
        parts.append(
            f"{name}: {plan_words(plan)}, {_blocks_run(sweep / 'baseline')} + "
            f"{_blocks_run(sweep / 'spec')} blocks run"
        )
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sessions", nargs="+", type=Path, help="session folders or .tar.gz")
    ap.add_argument("--out", type=Path, help="write the markdown here (default: stdout)")
    a = ap.parse_args(argv)
    names = [f"session {i + 1}" for i in range(len(a.sessions))]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        sweeps = [sweep_dir(s, scratch / f"s{i}") for i, s in enumerate(a.sessions)]
        reports = [compare(s, scratch) for s in sweeps]
        lines = [
            "### Interleaved sessions side by side (spec vs baseline, 95 % CI, effect by the rule)",
            "",
            f"_{blocks_line(names, sweeps)}._",
            "",
            f"_Rule: {reports[0]['rule']} **agree**: the same effect in every session. "
            "**inside**: every session's estimate inside every other's CI._",
            "",
        ]
        for metric in METRICS:
            lines += table(names, reports, metric)
        lines += regime_table(names, reports)
    text = "\n".join(lines)
    if a.out:
        a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
