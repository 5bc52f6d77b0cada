"""How much of an interleaved sweep's wall time is measured? The H200 scenario on the simulator.

One ``specload sweep --interleave --url baseline=URL --url spec=URL`` of
``scenarios/gpu-h200-interleaved.yaml`` (60 blocks: 5 cells x 2 conditions x 6 blocks of 6 s)
against two simulators shaped as the GPU kit's dry run starts them (``h200-llama8b``; spec
with a draft model and the calibrated fast/slow regime). Real time, real Locust, real HTTP
on 127.0.0.1: the overheads measured are the product's own.

Reported: the sweep's wall-time split (run.json ``interleave.time_split``), per block its
warm-up, measured window, cool-down and switch, and two checks of what was measured:

- the share of the block phase and of the whole sweep that was measured (the issue's targets:
  >= 75 % and >= 60 %; the one-run-per-block design measured 35 % / 23-26 % on the H200);
- at 16 req/s, p50 TPOT of the requests sent in each measured window's first half against its
  second half, per condition (the old design's second halves read 9-15 % lower: the load fell
  while they were served); and whether the blocks of one step drew different arrivals.

Usage: python benchmarks/sweep_efficiency.py [--blocks N] [--step-s S] [--block-warmup-s W]
                                             [--out DIR] [--name NAME]
       python benchmarks/sweep_efficiency.py --reanalyse DIR  (a sweep kept with --out)
Results: ``benchmarks/results/sweep_efficiency.md`` and ``.json``; the outside check's shape
(8-s blocks after a fixed 2-s warm-up: ``--step-s 48 --block-warmup-s 2``) in
``sweep_efficiency_8s.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specload.scenario import load_scenario
from specload.scenario.schema import INTERLEAVE_ORDERS, InterleaveSpec

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SCENARIO = ROOT / "scenarios" / "gpu-h200-interleaved.yaml"
SPEC = (
    '{"method":"draft_model","model":"draft-1b","num_speculative_tokens":4,'
    '"rejection_sample_method":"synthetic","synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'
)
#: The one-run-per-block design on the H200 (benchmarks/results/gpu-h200-interleaved/,
#: re-derived in the issue from blocks.log and the records): measured share of the block
#: phase and of the whole kit run, per session.
OLD_H200 = {"block_phase": [0.35, 0.34, 0.35], "whole": [0.23, 0.25, 0.26]}


def _sim(port: int, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "specload", "sim", "--host", "127.0.0.1", "--port", str(port),
           "--profile", "h200-llama8b", "--served-model-name", "target",
           "--no-enable-prefix-caching", *extra]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    """Until a simulator answers /health (it takes a few seconds to start)."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} never became healthy")


def _scenario(
    tmp: Path,
    blocks: int | None,
    step_s: float | None,
    warmup_s: float | None = None,
    order: str | None = None,
) -> Path:
    """The H200 scenario with its ``interleave`` line (and step length) as asked."""
    text = SCENARIO.read_text()
    spec = load_scenario(SCENARIO).interleave or InterleaveSpec()
    inner = f"blocks: {blocks if blocks is not None else spec.blocks}"
    if warmup_s is not None:  # an explicit block warm-up instead of the derived one
        inner += f", block_warmup_s: {warmup_s:g}"
    inner += f", order: {order or spec.order}"
    text = re.sub(r"(?m)^interleave: .*$", f"interleave: {{{inner}}}", text)
    if step_s is not None:
        text = re.sub(r"(?m)^step_duration_s: .*$", f"step_duration_s: {step_s:g}", text)
    path = tmp / "scenario.yaml"
    path.write_text(text)
    return path


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines() if x]


#: two-sided 97.5 % t quantiles by degrees of freedom (a 95 % interval over blocks)
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def _halves(out: Path, qps: float) -> dict[str, dict[str, Any]]:
    """Per condition at ``qps``: p50 TPOT of the measured requests sent in each window's
    first half and second half, pooled and per block; the mean of the blocks' second/first
    ratios with a 95 % t interval over blocks (is there a trend beyond the blocks' noise?)."""
    result: dict[str, dict[str, Any]] = {}
    for cond in ("baseline", "spec"):
        steps = {s["block"]: s for s in json.loads((out / cond / "steps.json").read_text())}
        halves: dict[int, tuple[list[float], list[float]]] = {}
        for r in _records(out / cond):
            s = steps.get(r.get("block"))
            if s is None or r["warmup"] or r["target_qps"] != qps or r.get("tpot_s") is None:
                continue
            mid = (s["warmup_end"] + s["end"]) / 2
            pair = halves.setdefault(r["block"], ([], []))
            (pair[0] if r["scheduled_at"] < mid else pair[1]).append(r["tpot_s"])
        first = [x for a, _ in halves.values() for x in a]
        second = [x for _, b in halves.values() for x in b]
        p1 = statistics.median(first) * 1000 if first else None
        p2 = statistics.median(second) * 1000 if second else None
        ratios = [
            statistics.median(b) / statistics.median(a) - 1 for a, b in halves.values() if a and b
        ]
        mean = statistics.mean(ratios) if ratios else None
        half = (
            _T975.get(len(ratios) - 1, 2.0) * statistics.stdev(ratios) / len(ratios) ** 0.5
            if len(ratios) > 1
            else None
        )
        result[cond] = {
            "first_half_p50_ms": p1,
            "second_half_p50_ms": p2,
            "second_vs_first": (p2 / p1 - 1) if p1 and p2 else None,
            "n_first": len(first),
            "n_second": len(second),
            "block_ratios": ratios,
            "block_mean": mean,
            "block_ci": [mean - half, mean + half]
            if mean is not None and half is not None
            else None,
        }
    return result


def _blocks(out: Path) -> list[dict[str, Any]]:
    """Per block its phases (seconds). A block that continues the one before (the same
    server and cell, its window opening where that one's ends: ``order: grouped``) has no
    warm-up and leaves the one before it no cool-down of its own: that time is its window."""
    rows = []
    for cond in ("baseline", "spec"):
        for s in json.loads((out / cond / "steps.json").read_text()):
            rows.append(
                {
                    "block": s["block"],
                    "condition": cond,
                    "target_qps": s["target_qps"],
                    "concurrency": s.get("concurrency", 0),
                    "warmup_s": s["warmup_end"] - s["start"],
                    "measured_s": s["end"] - s["warmup_end"],
                    "cooldown_s": (s.get("cooldown_end") or s["end"]) - s["end"],
                    "start": s["start"],
                    "warmup_end": s["warmup_end"],
                    "end": s["end"],
                    "cooldown_end": s.get("cooldown_end") or s["end"],
                    "continued": False,
                }
            )
    rows.sort(key=lambda r: r["start"])
    for a, b in zip(rows, rows[1:], strict=False):
        b["continued"] = b["condition"] == a["condition"] and b["start"] == a["end"]
        a["continued_by_next"] = b["continued"]
        if b["continued"]:
            a["cooldown_s"] = 0.0
        a["switch_s"] = max(0.0, b["start"] - a["cooldown_end"])
    return rows


def _window_opening(out: Path, fixed_warmup_s: float | None) -> dict[str, Any]:
    """When each block's measured window opened against the previous block's last request
    (its cool-down's included, from the records), where that block ran on the other server:
    how many opened while that server still had one in flight, and, with a fixed warm-up,
    how long after they could have opened (the later of the planned warm-up's end and that
    last request). A block that continues its own server's load (``_blocks``) is counted
    apart."""
    last: dict[int, float] = {}
    for cond in ("baseline", "spec"):
        for r in _records(out / cond):
            if r.get("block") is not None and r.get("done_at") is not None:
                last[r["block"]] = max(last.get(r["block"], 0.0), r["done_at"])
    rows = _blocks(out)
    pairs = [
        (a, b) for a, b in zip(rows, rows[1:], strict=False) if a["condition"] != b["condition"]
    ]
    done = {r["block"]: last.get(r["block"], r["end"]) for r in rows}
    out_: dict[str, Any] = {
        "blocks": len(pairs),
        "opened_while_other_busy": sum(b["warmup_end"] < done[a["block"]] for a, b in pairs),
        "continued": sum(r["continued"] for r in rows),
    }
    if fixed_warmup_s is not None:
        late = [
            b["warmup_end"] - max(b["start"] + fixed_warmup_s, done[a["block"]]) for a, b in pairs
        ]
        out_["late_s"] = {
            "mean": statistics.mean(late),
            "median": statistics.median(late),
            "max": max(late),
        }
    return out_


def _p50_e2e(out: Path) -> dict[str, dict[str, float]]:
    """p50 E2E (s) of the measured requests per condition and cell: about what one warm-up
    and one cool-down each take."""
    out_: dict[str, dict[str, float]] = {}
    for cond in ("baseline", "spec"):
        by: dict[str, list[float]] = {}
        for r in _records(out / cond):
            if r["ok"] and not r["warmup"] and r.get("e2e_s"):
                cell = (
                    f"c={r['concurrency']}"
                    if r.get("concurrency")
                    else f"{r['target_qps']:g} req/s"
                )
                by.setdefault(cell, []).append(r["e2e_s"])
        out_[cond] = {cell: statistics.median(v) for cell, v in sorted(by.items())}
    return out_


def _draws_differ(out: Path) -> bool:
    """Whether the blocks of one condition at one QPS step sent at different offsets."""
    for cond in ("baseline", "spec"):
        steps = {s["block"]: s for s in json.loads((out / cond / "steps.json").read_text())}
        by_block: dict[int, list[float]] = {}
        for r in _records(out / cond):
            s = steps.get(r.get("block"))
            if s is not None and not r["warmup"] and r["target_qps"] > 0:
                by_block.setdefault(r["block"], []).append(
                    round(r["scheduled_at"] - s["warmup_end"], 3)
                )
        seen: dict[float, list[tuple[float, ...]]] = {}
        for b, offsets in by_block.items():
            seen.setdefault(steps[b]["target_qps"], []).append(tuple(sorted(offsets)))
        if any(len(set(v)) != len(v) for v in seen.values()):
            return False
    return True


def analyse(out: Path, log: str, warmup_s: float | None) -> dict[str, Any]:
    """Every check of one kept interleaved sweep (``out`` holds ``baseline/`` and ``spec/``),
    from its run dirs and the sweep's terminal output ``log``: the same figures for a sweep
    run here and one the GPU kit ran on a GPU host."""
    meta = json.loads((out / "baseline" / "run.json").read_text())
    split = meta["interleave"]["time_split"]
    last = [x for x in log.splitlines() if x.startswith("[interleave] wall time")]
    return {
        "scenario": str(SCENARIO.relative_to(ROOT)),
        "blocks_per_cell": meta["interleave"]["blocks_per_cell"],
        "order": meta["interleave"].get("order", "spread"),
        "block_s": meta["interleave"]["block_s"],
        "time_split": split,
        "measured_share_of_block_phase": split["measured_s"] / split["block_phase_s"],
        "measured_share_of_whole": split["measured_s"] / split["total_s"],
        "wall_time_line": last[-1] if last else None,
        "halves_16": _halves(out, 16.0),
        "draws_differ": _draws_differ(out),
        "blocks": _blocks(out),
        "window_opening": _window_opening(out, warmup_s),
        "p50_e2e_s": _p50_e2e(out),
        "old_h200": OLD_H200,
        "block_warmup_s": warmup_s,
    }


def run(
    blocks: int | None,
    step_s: float | None,
    keep: Path | None,
    warmup_s: float | None = None,
    order: str | None = None,
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="sweep-eff-"))
    from specload.core.ports import free_port

    ports = free_port(), free_port()
    sims = [
        _sim(ports[0]),
        _sim(ports[1], "--spec-regime", "calibrated", "--speculative-config", SPEC),
    ]
    try:
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for u in urls:
            wait_healthy(u)
        out = keep or tmp / "sweep"
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "specload", "sweep", "--interleave",
             "--url", f"baseline={urls[0]}", "--url", f"spec={urls[1]}",
             "--condition", f"spec=--speculative-config {SPEC}",
             "--scenario", str(_scenario(tmp, blocks, step_s, warmup_s, order)),
             "--out", str(out)],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        wall = time.monotonic() - t0
        if proc.returncode not in (0, 1):
            raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
        result = analyse(out, proc.stdout, warmup_s)
        result.update(sweep_wall_s=wall, exit_code=proc.returncode)
        return result
    finally:
        for s in sims:
            s.terminate()
        for s in sims:
            s.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def from_kit(archive: Path, kit_log: Path) -> dict[str, Any]:
    """The checks of a GPU kit's interleaved run (``benchmarks/gpu/run.sh``): its packed
    output folder and its terminal output. Beside the sweep's own split, the whole kit run
    (server starts included) from the kit's last ``[gpu-kit +Ns]`` line, and the GPU."""
    import re
    import tarfile

    log = kit_log.read_text()
    with tempfile.TemporaryDirectory(prefix="sweep-eff-kit-") as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        out = Path(tmp) / "out"
        result = analyse(out / "sweep", log, None)
        csv = out / "nvidia-smi.csv"  # absent on a --dry-run
        smi = csv.read_text().splitlines() if csv.exists() else []
    kit_s = [int(x) for x in re.findall(r"\[gpu-kit \+\s*(\d+)s\]", log)]
    starts = [float(x) for x in re.findall(r"healthy at \S+ after (\d+) s", log)]
    measured = result["time_split"]["measured_s"]
    result.update(
        kit={
            "archive": archive.name,
            "gpu": smi[1].split(",")[1].strip() if len(smi) > 1 else "simulated GPU (--dry-run)",
            "wall_s": max(kit_s) if kit_s else None,
            "server_health_s": starts,
            "measured_share_of_kit_run": measured / max(kit_s) if kit_s else None,
        },
    )
    return result


def _met(r: dict[str, Any]) -> str:
    phase, whole = r["measured_share_of_block_phase"], r["measured_share_of_whole"]
    return (
        f"block phase {'met' if phase >= 0.75 else 'not met'}, whole sweep "
        f"{'met' if whole >= 0.60 else 'not met'}"
    )


def _warmup_words(r: dict[str, Any]) -> str:
    """How the blocks' warm-up was set: the scenario's fixed one, or derived per block."""
    fixed = r.get("block_warmup_s")
    if fixed is None:
        return "warm-up derived per block"
    return (
        f"warm-up fixed at {fixed:g} s (`block_warmup_s`), held longer while the other server "
        "still serves its last block's requests"
    )


def _opening_words(r: dict[str, Any]) -> str:
    """The windows' opening, from the records (``_window_opening``), in a sentence."""
    w = r.get("window_opening")
    if not w:
        return ""
    late = w.get("late_s")
    after = (
        f"; with the fixed warm-up, a window opened {late['mean']:.3f} s after it could have on "
        f"average (median {late['median']:.3f}, max {late['max']:.3f})"
        if late
        else ""
    )
    kept = (
        f" {w['continued']} more continued their own server's load (the same server and "
        "step next: no warm-up, no switch)."
        if w.get("continued")
        else ""
    )
    return (
        f"Of {w['blocks']} windows after another server's block, {w['opened_while_other_busy']} "
        f"opened while that server still had a request in flight{after}.{kept}\n"
    )


def _where(r: dict[str, Any]) -> str:
    """Where the sweep ran: the simulators here, or a GPU kit run (with its whole-run share)."""
    k = r.get("kit")
    if not k:
        return (
            "on two `specload sim --profile h200-llama8b` servers (spec: draft model, calibrated "
            "regime),\none `specload sweep --interleave --url ...` on this machine (2 shared "
            "cores), real time."
        )
    health = " and ".join(f"{x:.0f} s" for x in k["server_health_s"])
    return (
        f"on two vLLM servers on one {k['gpu']}, the GPU kit's interleaved run "
        f"(`benchmarks/gpu/run.sh`, `{k['archive']}`). The whole kit run took {k['wall_s']} s, "
        f"of which the servers took {health} to answer /health (one after the other); "
        f"**{k['measured_share_of_kit_run'] * 100:.0f} % of the whole kit run was measured**."
    )


def _old_whole_note(r: dict[str, Any]) -> str:
    """How the old whole-kit shares compare with this sweep's whole: they include the vLLM
    starts, which a sweep here (servers up already) does not."""
    if r.get("kit"):
        return f" (whole kit run, vLLM starts included: this run's is {_pct(r['kit']['measured_share_of_kit_run'])})"
    return " (the kit run includes ~6 min of vLLM starts; here the servers were up already)"


def _kind_row(kind: str, bs: list[dict[str, Any]]) -> str:
    """One cell's row of the per-block table: medians over the blocks that have the phase."""

    def med(key: str, keep: Any = lambda b: True) -> str:
        vals = [b[key] for b in bs if keep(b)]
        return f"{statistics.median(vals):.1f}" if vals else "—"

    switches = [b["switch_s"] for b in bs if "switch_s" in b and not b.get("continued_by_next")]
    return (
        f"| {kind} | {len(bs)} | {sum(b.get('continued', False) for b in bs)} | "
        f"{med('warmup_s', lambda b: not b.get('continued'))} | {med('measured_s')} | "
        f"{med('cooldown_s', lambda b: not b.get('continued_by_next'))} | "
        f"{statistics.median(switches) if switches else 0.0:.2f} |"
    )


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _cell(b: dict[str, Any]) -> str:
    return f"c={b['concurrency']}" if b["concurrency"] else f"{b['target_qps']:g} req/s"


def _bound(r: dict[str, Any], target: float = 0.75) -> str:
    """What the block-phase target would need of the warm-ups, from this sweep's own figures:
    its cool-downs and switches as they were, the measured seconds it had, and the warm-up
    the design asks for (about one p50 E2E, ``InterleaveSpec``) known exactly from the start."""
    s, opened = r["time_split"], [b for b in r["blocks"] if not b.get("continued")]
    if r.get("block_warmup_s") is not None or not opened or not r.get("p50_e2e_s"):
        return ""
    p50 = r["p50_e2e_s"]
    e2e = [max(p50[c][_cell(b)] for c in p50 if _cell(b) in p50[c]) for b in opened[1:]]
    first = opened[0]["warmup_s"]  # the session's first: nothing is known before it
    fixed = s["block_phase_s"] - s["warmup_s"]  # measured, cool-downs, switching
    allowed = s["measured_s"] / target - fixed - first
    oracle = s["measured_s"] / (fixed + first + sum(e2e))
    return (
        f"What {_pct(target)} would need: this sweep's measured {s['measured_s']:.0f} s, "
        f"cool-downs {s['cooldown_s']:.0f} s and switching {s['switching_s']:.0f} s leave "
        f"{max(0.0, allowed):.0f} s for the warm-ups of the {len(e2e)} blocks opened after the "
        f"first ({first:.0f} s): {max(0.0, allowed) / len(e2e):.2f} s each, where their cells' "
        f"p50 E2E averages {statistics.mean(e2e):.2f} s. Warm-ups of exactly one p50 E2E "
        f"(the larger condition's, as if known from the first block on) would have measured "
        f"{oracle * 100:.1f} % of the block phase.\n"
    )


def _markdown(r: dict[str, Any]) -> str:
    s = r["time_split"]
    pct = lambda x: f"{x * 100:.0f} %"  # noqa: E731
    rows = "\n".join(
        f"| {name} | {s[key]:.0f} s |"
        for name, key in (
            ("server starts (the sweep got `--url`s of servers already up)", "server_starts_s"),
            ("warm-up", "warmup_s"),
            ("measured", "measured_s"),
            ("cool-down", "cooldown_s"),
            ("switching", "switching_s"),
            ("run start and end (prompts prepared once per server, drain, split)", "other_s"),
            ("whole sweep (compare excluded)", "total_s"),
        )
    )
    per_kind: dict[str, list[dict[str, Any]]] = {}
    for b in r["blocks"]:
        per_kind.setdefault(_cell(b), []).append(b)
    kinds = "\n".join(_kind_row(k, bs) for k, bs in per_kind.items())
    halves = "\n".join(
        f"| {c} | {h['first_half_p50_ms']:.2f} ({h['n_first']}) | "
        f"{h['second_half_p50_ms']:.2f} ({h['n_second']}) | {h['second_vs_first'] * 100:+.1f} % | "
        + (
            f"{h['block_mean'] * 100:+.1f} % ({h['block_ci'][0] * 100:+.1f}…"
            f"{h['block_ci'][1] * 100:+.1f} %), {len(h['block_ratios'])} blocks |"
            if h.get("block_ci")
            else "— |"
        )
        for c, h in r["halves_16"].items()
        if h["first_half_p50_ms"] and h["second_half_p50_ms"]
    )
    return f"""# How much of an interleaved sweep is measured (`benchmarks/sweep_efficiency.py`)

`{r["scenario"]}` ({r["blocks_per_cell"]} blocks of {r["block_s"]:g} s per cell and condition,
order `{r.get("order", "spread")}`, {_warmup_words(r)})
{_where(r)}

Measured: **{pct(r["measured_share_of_block_phase"])} of the block phase** and
**{pct(r["measured_share_of_whole"])} of the whole sweep**. The one-run-per-block design
measured {"/".join(pct(x) for x in r["old_h200"]["block_phase"])} of the block phase and
{"/".join(pct(x) for x in r["old_h200"]["whole"])} of the whole kit run in the three H200
sessions{_old_whole_note(r)}.
The targets set for this design were 75 % and 60 %: {_met(r)}.

{r.get("note", "")}{_opening_words(r)}
The sweep's own line: `{r["wall_time_line"]}`

| where the time went | seconds |
| --- | --- |
{rows}

Per block (medians, seconds; a block that continued its server's load has no warm-up, and
the block before it no cool-down: the medians are over the others):

| cell | blocks | continued | warm-up | measured | cool-down | switch |
| --- | --- | --- | --- | --- | --- | --- |
{kinds}

Why not more: a block's measured window is {r["block_s"]:g} s; around it the warm-up lasts
about one request (the cell's p50 E2E so far, any cell's for a cell's first block, 5 s for
the session's first) and the cool-down until
the window's last measured requests are in (about one request again: at 256 output tokens
both are seconds). Both are the price of measuring only a full batch at a steady load.
With `order: grouped` a server runs two blocks of a step in a row where the step's pairs
meet (A B, B A, ...), and those two share one warm-up and one cool-down: a step of n pairs
then has n + 1 warm-ups, the fewest that keep every pair's two blocks adjacent, where
`spread` has about 2n. Longer blocks (fewer per cell) raise the share; so does a shorter
output.
{_bound(r)}
16 req/s, p50 TPOT of the measured requests sent in each window's first half against its
second half (the old design's second halves read 9 % (baseline) and 15 % (spec) lower, the
load falling while they were served):

| condition | first half ms (n) | second half ms (n) | second vs first, pooled | per block: mean (95 % CI over blocks) |
| --- | --- | --- | --- | --- |
{halves}

A trend beyond the blocks' own noise would show as a per-block interval that excludes 0.

Blocks of one step drew different arrivals (no replayed draw): {r["draws_differ"]}.
"""


def reanalyse(out: Path, name: str) -> dict[str, Any]:
    """The committed result with the checks of the records recomputed from a kept sweep."""
    result = json.loads((RESULTS / f"{name}.json").read_text())
    result["halves_16"] = _halves(out, 16.0)
    result["draws_differ"] = _draws_differ(out)
    result["window_opening"] = _window_opening(out, result.get("block_warmup_s"))
    result["p50_e2e_s"] = _p50_e2e(out)
    result["blocks"] = _blocks(out)
    result["order"] = json.loads((out / "baseline" / "run.json").read_text())["interleave"].get(
        "order", "spread"
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--reanalyse", type=Path, metavar="DIR", help="recompute the checks of a kept sweep (--out)"
    )
    ap.add_argument("--blocks", type=int, help="blocks per cell (default: the scenario's, 6)")
    ap.add_argument("--step-s", type=float, help="step_duration_s (default: the scenario's, 36)")
    ap.add_argument(
        "--block-warmup-s", type=float, help="a fixed block warm-up (default: derived per block)"
    )
    ap.add_argument(
        "--order", choices=INTERLEAVE_ORDERS, help="interleave.order (default: the scenario's)"
    )
    ap.add_argument(
        "--render", action="store_true", help="rewrite NAME.md from the committed NAME.json"
    )
    ap.add_argument("--out", type=Path, help="keep the sweep here")
    ap.add_argument("--name", default="sweep_efficiency", help="results file name")
    ap.add_argument(
        "--kit", type=Path, nargs=2, metavar=("ARCHIVE", "LOG"),
        help="analyse a GPU kit's interleaved run: its OUT.tar.gz and its terminal output",
    )  # fmt: skip
    args = ap.parse_args()
    if args.render:
        result = json.loads((RESULTS / f"{args.name}.json").read_text())
    elif args.kit:
        result = from_kit(*args.kit)
    elif args.reanalyse:
        result = reanalyse(args.reanalyse, args.name)
    else:
        result = run(args.blocks, args.step_s, args.out, args.block_warmup_s, args.order)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
