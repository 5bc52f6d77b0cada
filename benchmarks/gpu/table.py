"""specload vs vLLM's own benchmark client on the same server: the validation table.

Reads two run dirs of one server start each (baseline and spec, made with ``specload run
--scenario scenarios/gpu-h200.yaml`` against vLLM; a run dir or its ``.tar.gz``) and the calibration that vLLM's
``bench serve`` measured with the same server setup on the same host type
(``benchmarks/data/h200-vllm0.26-llama8b-draft1b.json``), and writes, per condition and
rate: specload's p50/p95 TTFT and TPOT, vLLM's client's, and their ratio; then the spec /
baseline p50 TPOT ratio per rate for both clients and both crossovers.

Percentiles are numpy's linear interpolation over measured (non-warm-up), successful records,
the same estimator vLLM's ``bench serve`` uses. The crossover is the lowest rate at which
spec's p50 TPOT stops being lower than the baseline's, interpolated linearly in log-rate on
(ratio - 1) between the last rate where spec helps and the first where it does not (the
definition ``specload compare`` uses); it is computed here the same way for both clients.

    python benchmarks/gpu/table.py \\
        --baseline benchmarks/results/gpu-h200/run-baseline.tar.gz \\
        --spec benchmarks/results/gpu-h200/run-spec.tar.gz \\
        --out benchmarks/results/gpu-h200/table.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CALIBRATION = ROOT / "benchmarks" / "data" / "h200-vllm0.26-llama8b-draft1b.json"
#: The validation's bar: specload's p50 TPOT within 5 % of vLLM's client's up to this rate.
TPOT_TOLERANCE = 0.05
TPOT_CHECK_MAX_RATE = 28.0
METRICS = ("ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms")


def open_run(path: Path, scratch: Path) -> Path:
    """A run dir, unpacking a ``.tar.gz`` into ``scratch`` first (the run dir is its root)."""
    if path.is_dir():
        return path
    with tarfile.open(path) as tar:
        tar.extractall(scratch, filter="data")
    found = sorted(p.parent for p in scratch.rglob("run.json"))
    if not found:
        raise SystemExit(f"{path}: no run.json inside")
    return found[0]


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of ``requests.jsonl``; a partial trailing line is skipped."""
    out = []
    with open(run_dir / "requests.jsonl", encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def per_rate(records: list[dict[str, Any]]) -> dict[float, dict[str, Any]]:
    """Per target rate: n, errors, p50/p95 TTFT and TPOT (ms), achieved rate, queue delay."""
    by_rate: dict[float, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("warmup"):
            continue
        by_rate.setdefault(float(r["target_qps"]), []).append(r)
    out: dict[float, dict[str, Any]] = {}
    for rate, recs in sorted(by_rate.items()):
        ok = [r for r in recs if r.get("ok")]
        ttft = [r["ttft_s"] * 1e3 for r in ok if r.get("ttft_s") is not None]
        tpot = [r["tpot_s"] * 1e3 for r in ok if r.get("tpot_s") is not None]
        sched = sorted(r["scheduled_at"] for r in recs)
        span = sched[-1] - sched[0] if len(sched) > 1 else 0.0
        out[rate] = {
            "n": len(recs),
            "ok": len(ok),
            "errors": len(recs) - len(ok),
            "achieved_rps": (len(sched) - 1) / span if span > 0 else None,
            "ttft_p50_ms": pct(ttft, 50),
            "ttft_p95_ms": pct(ttft, 95),
            "tpot_p50_ms": pct(tpot, 50),
            "tpot_p95_ms": pct(tpot, 95),
            "queue_delay_p95_ms": pct([r.get("queue_delay_s", 0.0) * 1e3 for r in recs], 95),
            "output_tokens_p50": pct(
                [r["output_tokens"] for r in ok if r.get("output_tokens") is not None], 50
            ),
            "prompt_tokens_p50": pct(
                [r["prompt_tokens"] for r in ok if r.get("prompt_tokens") is not None], 50
            ),
        }
    return out


def acceptance_by_rate(run_dir: Path) -> dict[float, float]:
    """Per step's target rate: 1 + Δaccepted / Δdrafts from the step's start and end scrapes."""
    steps_path, metrics_path = run_dir / "steps.json", run_dir / "metrics.jsonl"
    if not steps_path.exists() or not metrics_path.exists():
        return {}
    rate_of = {s["index"]: float(s["target_qps"]) for s in json.loads(steps_path.read_text())}
    edges: dict[int, dict[str, dict[str, float]]] = {}
    with open(metrics_path, encoding="utf-8") as f:
        for line in f:
            try:
                m = json.loads(line)
            except json.JSONDecodeError:
                continue
            if m.get("step") is None or m.get("phase") not in ("start", "end"):
                continue
            edges.setdefault(m["step"], {})[m["phase"]] = m["values"]

    out = {}
    for step, e in edges.items():
        if "start" not in e or "end" not in e or step not in rate_of:
            continue
        d = {
            n: _total(e["end"], n) - _total(e["start"], n)
            for n in (
                "vllm:spec_decode_num_accepted_tokens_total",
                "vllm:spec_decode_num_drafts_total",
            )
        }
        if d["vllm:spec_decode_num_drafts_total"] > 0:
            out[rate_of[step]] = 1 + (
                d["vllm:spec_decode_num_accepted_tokens_total"]
                / d["vllm:spec_decode_num_drafts_total"]
            )
    return out


def server_agreement(run_dir: Path) -> list[dict[str, Any]]:
    """Per step: specload's mean TPOT / TTFT / E2E vs vLLM's own /metrics for the same requests.

    vLLM observes ``request_time_per_output_token``, ``time_to_first_token`` and
    ``e2e_request_latency`` when a request finishes; a step's Δsum/Δcount between its start
    and end scrapes is the server's mean over the requests that finished in that window, which
    are exactly specload's records whose ``done_at`` (TTFT: ``first_token_at``) falls in it.
    """
    steps = json.loads((run_dir / "steps.json").read_text())
    scrapes: dict[int, dict[str, dict[str, Any]]] = {}
    with open(run_dir / "metrics.jsonl", encoding="utf-8") as f:
        for line in f:
            try:
                m = json.loads(line)
            except json.JSONDecodeError:
                continue
            if m.get("step") is not None and m.get("phase") in ("start", "end"):
                scrapes.setdefault(m["step"], {}).setdefault(m["phase"], m)
    recs = [r for r in read_records(run_dir) if r.get("ok")]
    out = []
    for st in steps:
        e = scrapes.get(st["index"], {})
        if "start" not in e or "end" not in e:
            continue
        t0, t1 = e["start"]["t"], e["end"]["t"]

        def srv(hist: str, e: dict[str, Any] = e) -> float | None:
            """Mean of a vLLM histogram over the step, in ms: Δ_sum / Δ_count."""
            d = {
                x: _total(e["end"]["values"], f"{hist}_{x}")
                - _total(e["start"]["values"], f"{hist}_{x}")
                for x in ("sum", "count")
            }
            return d["sum"] / d["count"] * 1e3 if d["count"] else None

        done = [r for r in recs if t0 <= r["done_at"] < t1]
        first = [r for r in recs if t0 <= r["first_token_at"] < t1]
        row = {
            "rate": float(st["target_qps"]),
            "n": len(done),
            "tpot_client_ms": _mean([r["tpot_s"] for r in done]),
            "tpot_server_ms": srv("vllm:request_time_per_output_token_seconds"),
            "e2e_client_ms": _mean([r["e2e_s"] for r in done]),
            "e2e_server_ms": srv("vllm:e2e_request_latency_seconds"),
            "ttft_client_ms": _mean([r["ttft_s"] for r in first]),
            "ttft_server_ms": srv("vllm:time_to_first_token_seconds"),
        }
        out.append(row)
    return out


def _total(values: dict[str, float], name: str) -> float:
    """A sample summed over its labels (vLLM adds model_name and engine)."""
    return sum(v for k, v in values.items() if k.split("{")[0] == name)


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) * 1e3 if xs else None


def same_host_rows(folder: Path | None) -> dict[str, dict[float, dict[str, Any]]]:
    """vLLM ``bench serve`` run again on the validation host (``COND-summary.json``), if any."""
    out: dict[str, dict[float, dict[str, Any]]] = {}
    if folder is None:
        return out
    for path in sorted(folder.glob("*-summary.json")):
        data = json.loads(path.read_text())
        for r in data["rates"]:
            if r.get("status") == "ok":
                out.setdefault(data["condition"], {})[float(r["rate"])] = {
                    "tpot_p50_ms": r["median_tpot_ms"],
                    "tpot_p95_ms": r["p95_tpot_ms"],
                    "ttft_p50_ms": r["median_ttft_ms"],
                    "ttft_p95_ms": r["p95_ttft_ms"],
                }
    return out


def calibration_rows(path: Path) -> dict[str, dict[float, dict[str, Any]]]:
    data = json.loads(path.read_text())
    out: dict[str, dict[float, dict[str, Any]]] = {}
    for row in data["rows"]:
        out.setdefault(row["condition"], {})[float(row["rate_rps"])] = row
    return out


def crossover(rates: list[float], ratio: list[float | None], min_gain: float) -> float | None:
    """``specload compare``'s boundary search on one ratio curve (spec / baseline, per rate).

    The same code as compare (``specload.analysis.decisions.crossover.boundaries``) on point estimates:
    a rate helps when its gain ``1 - ratio`` is at least ``min_gain``; spec stops helping where
    the gain falls below ``min_gain`` after the first helping rate, interpolated in log-rate.
    None when spec helps at every rate or at none.
    """
    from specload.analysis.decisions.crossover import boundaries

    pts = [(r, x) for r, x in zip(rates, ratio, strict=True) if x is not None]
    if not pts:
        return None
    q = np.log(np.asarray([r for r, _ in pts], dtype=np.float64))
    gains = 1.0 - np.asarray([[x for _, x in pts]], dtype=np.float64)
    _, stops = boundaries(q, gains, gains >= min_gain, min_gain)
    point = float(stops[0])
    return point if math.isfinite(point) else None


def fmt(v: float | None, nd: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def condition_table(
    cond: str, sl: dict[float, dict[str, Any]], cal: dict[float, dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    lines = [
        f"### {cond}",
        "",
        (
            "| rate | n (sl) | TTFT p50 sl | TTFT p50 vllm | ratio | TTFT p95 sl | TTFT p95 vllm"
            " | ratio | TPOT p50 sl | TPOT p50 vllm | ratio | TPOT p95 sl | TPOT p95 vllm | ratio |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for rate in sorted(set(sl) | set(cal)):
        s, c = sl.get(rate, {}), cal.get(rate, {})
        row: dict[str, Any] = {
            "condition": cond,
            "rate": rate,
            "n": s.get("n"),
            "errors": s.get("errors"),
        }
        cells = [f"{rate:g}", str(s.get("n", "-"))]
        for m in METRICS:
            a, b = s.get(m), c.get(m)
            ratio = a / b if a is not None and b else None
            row[m] = {"specload": a, "vllm": b, "ratio": ratio}
            cells += [fmt(a), fmt(b), fmt(ratio, 3)]
        rows.append(row)
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""], rows


def build(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    cal = calibration_rows(args.calibration)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {
            c: open_run(p, Path(tmp) / c)
            for c, p in (("baseline", args.baseline), ("spec", args.spec))
        }
        sl = {c: per_rate(read_records(d)) for c, d in dirs.items()}
        acc = acceptance_by_rate(dirs["spec"])
        agree = {c: server_agreement(d) for c, d in dirs.items()}
    same = same_host_rows(args.same_host)
    md = [
        "# specload vs vLLM `bench serve` on the same server",
        "",
        (
            "sl = specload (this run, chat completions, streaming); vllm = vLLM's own client "
            "(`bench serve`, completions: the --calibration JSON, the same server start when "
            "the GPU kit wrote it). Times in ms; ratio = specload / vLLM."
        ),
        "",
    ]
    out: dict[str, Any] = {"rows": [], "tpot_check": [], "crossover": {}}
    for cond in ("baseline", "spec"):
        lines, rows = condition_table(cond, sl[cond], cal.get(cond, {}))
        md += lines
        out["rows"] += rows
    md += [
        "### p50 TPOT, spec / baseline",
        "",
        (
            "| rate | specload | vLLM client | spec acc. length (specload /metrics) "
            "| vLLM acc. length |"
        ),
        "|---:|---:|---:|---:|---:|",
    ]
    rates = sorted(set(sl["baseline"]) & set(sl["spec"]))
    cal_rates = sorted(set(cal.get("baseline", {})) & set(cal.get("spec", {})))
    sl_ratio = [
        _ratio(sl["spec"][r]["tpot_p50_ms"], sl["baseline"][r]["tpot_p50_ms"]) for r in rates
    ]
    cal_ratio = [
        _ratio(cal["spec"][r]["tpot_p50_ms"], cal["baseline"][r]["tpot_p50_ms"]) for r in cal_rates
    ]
    for r in sorted(set(rates) | set(cal_rates)):
        a = sl_ratio[rates.index(r)] if r in rates else None
        b = cal_ratio[cal_rates.index(r)] if r in cal_rates else None
        vacc = cal.get("spec", {}).get(r, {}).get("acceptance_length")
        md.append(f"| {r:g} | {fmt(a, 3)} | {fmt(b, 3)} | {fmt(acc.get(r))} | {fmt(vacc)} |")
    md += [
        "",
        "### Crossover on p50 TPOT (compare's rule, log-rate interpolation)",
        "",
        "| rule | specload | vLLM client |",
        "|---|---:|---:|",
    ]
    for gain in (args.min_gain, 0.0):
        x_sl, x_cal = crossover(rates, sl_ratio, gain), crossover(cal_rates, cal_ratio, gain)
        out["crossover"][f"min_gain_{gain:g}"] = {"specload": x_sl, "vllm": x_cal}
        rule = f"spec stops lowering p50 TPOT by >= {gain:.0%}" if gain else "ratio reaches 1"
        md.append(f"| {rule} | {fmt(x_sl, 1)} req/s | {fmt(x_cal, 1)} req/s |")
    if args.report is not None:
        x = json.loads(args.report.read_text())["crossover"]["spec"]["tpot_p50"]
        out["crossover"]["compare_report"] = x
        ci = x.get("ci") or [None, None]
        md.append(
            f"| `specload compare` report (p50 TPOT, 95 % CI) | {fmt(x.get('qps'), 1)} req/s "
            f"({fmt(ci[0], 1)}–{fmt(ci[1], 1)}) | |"
        )
    md.append("")
    md += tpot_check(sl, cal, same, out)
    md += agreement_table(agree, out)
    return "\n".join(md) + "\n", out


def agreement_table(agree: dict[str, list[dict[str, Any]]], out: dict[str, Any]) -> list[str]:
    md = [
        "### specload (client) vs vLLM's own /metrics (server), same requests, per step",
        "",
        (
            "Means over the requests that finished (TTFT: got their first token) between the "
            "step's start and end scrapes. vLLM's TTFT starts when it stamps the request's "
            "arrival, so it leaves out part of the HTTP and request preprocessing the client "
            "sees."
        ),
        "",
        (
            "| condition | rate | n | TPOT client | TPOT server | diff | E2E client | E2E server "
            "| diff | TTFT client | TTFT server |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out["server_agreement"] = agree
    for cond, rows in agree.items():
        for r in rows:
            d_tpot = _ratio(r["tpot_client_ms"], r["tpot_server_ms"])
            d_e2e = _ratio(r["e2e_client_ms"], r["e2e_server_ms"])
            md.append(
                f"| {cond} | {r['rate']:g} | {r['n']} | {fmt(r['tpot_client_ms'])} | "
                f"{fmt(r['tpot_server_ms'])} | {_pct(d_tpot)} | {fmt(r['e2e_client_ms'], 1)} | "
                f"{fmt(r['e2e_server_ms'], 1)} | {_pct(d_e2e)} | {fmt(r['ttft_client_ms'], 1)} | "
                f"{fmt(r['ttft_server_ms'], 1)} |"
            )
    return md + [""]


def _pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio - 1:+.2%}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def tpot_check(
    sl: dict[str, dict[float, dict[str, Any]]],
    cal: dict[str, dict[float, dict[str, Any]]],
    same: dict[str, dict[float, dict[str, Any]]],
    out: dict[str, Any],
) -> list[str]:
    """The validation's bar: |specload p50 TPOT / vLLM's - 1| <= 5 % at each rate up to 28 req/s.

    Beside it, where vLLM's client ran again on the validation host: its p50 TPOT, its drift
    from the calibration (the same client, seed and kit: the server's own run-to-run spread)
    and specload's difference from it.
    """
    md = [
        (
            f"### p50 TPOT within {TPOT_TOLERANCE:.0%} of vLLM's client (rates <= "
            f"{TPOT_CHECK_MAX_RATE:g})"
        ),
        "",
        (
            "| condition | rate | specload | vLLM (calibration) | diff | within | "
            "vLLM same host | vLLM same host vs calibration | specload vs vLLM same host |"
        ),
        "|---|---:|---:|---:|---:|:---:|---:|---:|---:|",
    ]
    for cond in ("baseline", "spec"):
        for rate in sorted(sl[cond]):
            c = cal.get(cond, {}).get(rate)
            if rate > TPOT_CHECK_MAX_RATE or c is None:
                continue
            a, b = sl[cond][rate]["tpot_p50_ms"], c["tpot_p50_ms"]
            diff = a / b - 1 if a is not None else None
            ok = diff is not None and abs(diff) <= TPOT_TOLERANCE
            h = same.get(cond, {}).get(rate, {}).get("tpot_p50_ms")
            out["tpot_check"].append(
                {"condition": cond, "rate": rate, "diff": diff, "within": ok, "vllm_same_host": h}
            )
            md.append(
                f"| {cond} | {rate:g} | {fmt(a)} | {fmt(b)} | "
                f"{'n/a' if diff is None else f'{diff:+.1%}'} | {'yes' if ok else 'NO'} | "
                f"{fmt(h)} | {_pct(_ratio(h, b))} | {_pct(_ratio(a, h))} |"
            )
    return md + [""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="baseline run dir or .tar.gz")
    p.add_argument("--spec", type=Path, required=True, help="spec run dir or .tar.gz")
    p.add_argument("--calibration", type=Path, default=DEFAULT_CALIBRATION)
    p.add_argument("--report", type=Path, help="specload compare's report.json (its crossover)")
    p.add_argument(
        "--same-host",
        type=Path,
        help="folder of vLLM bench COND-summary.json files run on the validation host",
    )
    p.add_argument(
        "--min-gain",
        type=float,
        default=0.05,
        help="compare's --min-gain (default 0.05, compare's default)",
    )
    p.add_argument("--out", type=Path, help="write the Markdown here (and .json beside it)")
    args = p.parse_args(argv)
    md, data = build(args)
    print(md)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(md)
        args.out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
