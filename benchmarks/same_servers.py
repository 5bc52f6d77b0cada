"""Two identical servers: does ``sweep --interleave --until-decided`` end "the same"?

A true 0 % effect should end ``same`` at every step, never helps or hurts. Here
both "conditions" are the same server configuration, started twice, so the true effect is
0 at every step. Two worlds, each on two ``specload sim --profile h200-llama8b`` servers:

- ``plain``: no speculation (the engine's steps are steady);
- ``regime``: the calibrated draft-model speculation on both, each with the calibrated time
  regime (``--spec-regime calibrated``) and its own regime seed, so the two servers flip
  between fast and slow windows independently, as the H200's speculative step did.

Each seed runs ``scenarios/interleaved-demo.yaml`` (concurrency 1, 4, 10, 20 req/s; 4 blocks
of 3 s per step and server) with the scenario's ``seed`` set to the seed (block order and
arrivals), ``--until-decided --budget-s BUDGET`` and compare's default ``--min-gain`` (5 %).
Reported per seed: each step's answer (helps, hurts, the same, undecided), how many looks the
sweep took and its wall time. A step that reads helps or hurts here is a false decision.

Real time on this machine (the simulators serve in real time; the machine is shared, so
both servers see the same load). Usage:
python benchmarks/same_servers.py [--seeds N] [--world plain|regime] [--budget-s S]
[--work DIR]
(writes results/same_servers.{md,json}; ~5-10 min a seed)
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from sweep_efficiency import wait_healthy  # the benchmarks' one /health wait

from specload.cli.demo import SPEC_CONFIGS
from specload.core.ports import free_port
from specload.core.procgroup import stop_group
from specload.report.report_json import read_report

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
SCENARIO = ROOT / "scenarios" / "interleaved-demo.yaml"
PROFILE = "h200-llama8b"
WORLDS = ("plain", "regime")


def _sim_flags(world: str, server: int, seed: int) -> list[str]:
    if world == "plain":
        return []
    spec = json.dumps(SPEC_CONFIGS[PROFILE], separators=(",", ":"))
    regime_seed = str(1000 * seed + server)
    return ["--speculative-config", spec, "--spec-regime", "calibrated", "--regime-seed",
            regime_seed]  # fmt: skip


def _start_sim(
    world: str, server: int, seed: int, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "specload", "sim", "--host", "127.0.0.1", "--port", str(port),
           "--profile", PROFILE, *_sim_flags(world, server, seed)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def one_seed(world: str, seed: int, budget_s: float, work: Path) -> dict[str, Any]:
    """One sweep of two identical servers; each step's answer, the looks and the wall time."""
    work.mkdir(parents=True, exist_ok=True)
    sc = yaml.safe_load(SCENARIO.read_text())
    sc["seed"] = seed
    scenario = work / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(sc, sort_keys=False))
    sims = [_start_sim(world, k, seed, work / f"sim-{k}.log") for k in (1, 2)]
    try:
        for _, url in sims:
            wait_healthy(url)
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-m", "specload", "sweep", "--interleave",
             "--url", f"a={sims[0][1]}", "--url", f"b={sims[1][1]}", "--scenario", str(scenario),
             "--out", str(work / "out"), "--until-decided", "--budget-s", str(budget_s)],
            capture_output=True, text=True, check=False, timeout=budget_s + 900,
        )  # fmt: skip
        wall = time.monotonic() - t0
    finally:
        for proc, _ in sims:
            stop_group(proc, [(signal.SIGINT, 20.0)])
    (work / "sweep.log").write_text(res.stdout + res.stderr)
    looks = sum(1 for line in res.stdout.splitlines() if line.startswith("[until-decided] look"))
    if not (work / "out" / "report" / "report.json").is_file():
        return {"world": world, "seed": seed, "rc": res.returncode, "wall_s": round(wall, 1),
                "looks": looks, "answers": {}, "error": (res.stdout + res.stderr)[-600:]}  # fmt: skip
    return {"world": world, "seed": seed, "rc": res.returncode, "wall_s": round(wall, 1),
            "looks": looks, **_read_cells(work)}  # fmt: skip


def _read_cells(work: Path) -> dict[str, Any]:
    """Each step's answer, and its CI and time to decide, from the sweep's report.json."""
    path = work / "out" / "report" / "report.json"
    read_report(path)  # the schema and keys checked, as every reader of a report does
    data = json.loads(path.read_text())  # closed_loop is not in the typed view
    metric = data["metric"]
    cells = {f"{r['target_qps']:g} req/s": r for r in data["ratios"]["b"][metric]}
    for level in data["closed_loop"]:
        cell = level["ratios"].get("b", {}).get(metric)
        if cell:
            cells[f"c={level['concurrency']}"] = cell
    return {
        "answers": {k: c["effect"] for k, c in cells.items()},
        "ci": {k: [c["lo"], c["hi"]] for k, c in cells.items()},
        "to_decide_s": {k: c.get("to_decide_s") for k, c in cells.items()},
    }


def _ci_text(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"{100 * (ci[0] - 1):+.0f}…{100 * (ci[1] - 1):+.0f}"


def _render(rows: list[dict[str, Any]], budget_s: float) -> str:
    steps = list(dict.fromkeys(k for r in rows for k in r["answers"]))
    lines = [
        "# Two identical servers under `sweep --interleave --until-decided`",
        "",
        f"`python benchmarks/same_servers.py`: `scenarios/interleaved-demo.yaml`, "
        f"`--until-decided --budget-s {budget_s:g}`, `--min-gain` 5 %, the true effect 0 at "
        "every step (see the module docstring for the worlds). A helps or hurts is a false "
        "decision.",
        "",
        "| world | seed | " + " | ".join(steps) + " | looks | wall s | exit |",
        "| --- | --- | " + " | ".join("---" for _ in steps) + " | --- | --- | --- |",
    ]
    for r in rows:
        cells = [r["answers"].get(s, "—") for s in steps]
        lines.append(f"| {r['world']} | {r['seed']} | " + " | ".join(cells)
                     + f" | {r['looks']} | {r['wall_s']:.0f} | {r['rc']} |")  # fmt: skip
    lines += ["", "95 % CIs of b / a, p50 TPOT (the change, in %):", "",
              "| world | seed | " + " | ".join(steps) + " |",
              "| --- | --- | " + " | ".join("---" for _ in steps) + " |"]  # fmt: skip
    for r in rows:
        cis = [_ci_text(r.get("ci", {}).get(s)) for s in steps]
        lines.append(f"| {r['world']} | {r['seed']} | " + " | ".join(cis) + " |")
    for world in dict.fromkeys(r["world"] for r in rows):
        got = [a for r in rows if r["world"] == world for a in r["answers"].values()]
        false = sum(a in ("helps", "hurts") for a in got)
        same = sum(a == "same" for a in got)
        waits = sorted(
            t for r in rows if r["world"] == world for t in r.get("to_decide_s", {}).values() if t
        )
        wait = (
            f"; the undecided steps' time to decide, by the reports: median {waits[len(waits) // 2] / 3600:.0f} h"
            if waits
            else ""
        )
        lines.append(
            f"\n{world}: {same} of {len(got)} seed-steps the same, {false} false decisions "
            f"(helps or hurts){wait}."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--world", choices=WORLDS, action="append")
    ap.add_argument("--budget-s", type=float, default=600.0)
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "same-servers",
                    help="where each sweep's run dirs and log go (kept)")  # fmt: skip
    ap.add_argument("--reread", action="store_true",
                    help="no sweeps: re-read results/same_servers.json's runs under --work")  # fmt: skip
    args = ap.parse_args()
    if args.reread:
        result = json.loads((OUT / "same_servers.json").read_text())
        for row in result["rows"]:
            row.update(_read_cells(args.work / f"{row['world']}-{row['seed']}"))
        _write(result["rows"], result["budget_s"])
        return
    rows = []
    shutil.rmtree(args.work, ignore_errors=True)
    for world in args.world or list(WORLDS):
        for seed in range(1, args.seeds + 1):
            row = one_seed(world, seed, args.budget_s, args.work / f"{world}-{seed}")
            print(json.dumps(row), flush=True)
            rows.append(row)
    _write(rows, args.budget_s)


def _write(rows: list[dict[str, Any]], budget_s: float) -> None:
    result = {"budget_s": budget_s, "rows": rows}
    (OUT / "same_servers.json").write_text(json.dumps(result, indent=1) + "\n")
    text = _render(rows, budget_s)
    (OUT / "same_servers.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
