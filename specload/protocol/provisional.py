"""The comparison of a run still in progress against a finished baseline run.

The web UI shows, while a run goes, its ratios to a baseline run with CIs and the verdict
so far. Those figures must follow the same rule as ``specload compare`` (one rule, one
definition), so they are ``compare``'s own: this module writes a *view* of the live run
directory holding only the steps that have settled (every request of the step has its
record), then compares that view with the baseline by ``compare_runs`` and writes the same
``report.json``. A step still running, or one whose in-flight requests have not returned,
never enters: its tail would be missing, and p95 would read low.

It runs as a child process (``python -m specload.protocol.provisional``) of the Locust master, so the
bootstrap and the reading of ``requests.jsonl`` never hold up the master's event loop, which
paces arrivals in a local run. ``summary()`` turns the report, read typed
(``report.report_json.read_report``), into the few figures the web UI shows. Exit codes as
``specload compare``: 2 with one line on stderr on bad input (for example runs that are not
comparable).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

import orjson

from specload.core.errors import SpecloadError
from specload.recorder.steps_json import STEPS_JSON, read_steps
from specload.report.report_json import ReportData, StepRow
from specload.report.wording import load_ci_text, signed_change

__all__ = [
    "UI_METRICS",
    "main",
    "summary",
    "write_view",
]

#: The ratios the web UI shows per step (the issue's four: p50/p95 TPOT, p50 TTFT, p50 E2E).
UI_METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "e2e_p50")
#: Per-step latencies the UI charts for both conditions.
CHART_METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "ttft_p95")


def _step_of(line: bytes) -> int | None:
    try:
        step = orjson.loads(line).get("step")
    except orjson.JSONDecodeError:  # a half-written last line: not settled, leave it out
        return None
    return step if isinstance(step, int) else None


def _filter_jsonl(src: Path, dest: Path, steps: set[int]) -> int:
    """Copy the lines of ``src`` whose ``step`` is in ``steps``; how many were copied."""
    n = 0
    with dest.open("wb") as out:
        if src.exists():
            with src.open("rb") as f:
                for line in f:
                    if line.strip() and _step_of(line) in steps:
                        out.write(line if line.endswith(b"\n") else line + b"\n")
                        n += 1
    return n


def write_view(run_dir: str | Path, dest: str | Path, steps: set[int]) -> Path:
    """A run directory at ``dest`` holding only ``steps`` (indexes) of ``run_dir``.

    run.json is copied as it is (its status stays ``running``: the view is not a finished
    run) with its counts set to what the view holds; steps.json, requests.jsonl and
    metrics.jsonl keep the settled steps' entries only.
    """
    from specload.recorder.run_json import load_run_json
    from specload.recorder.rundir import RunMeta

    src, out = Path(run_dir), Path(dest)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    raw = load_run_json(src)
    meta = RunMeta.from_dict(raw)
    plan = read_steps(src)[0]
    (out / STEPS_JSON).write_bytes(orjson.dumps([s for s in plan if s.get("index") in steps]))
    n = _filter_jsonl(src / "requests.jsonl", out / "requests.jsonl", steps)
    _filter_jsonl(src / "metrics.jsonl", out / "metrics.jsonl", steps)
    meta.counts = {**meta.counts, "sent": n, "recorded": n, "by_worker": {}}
    (out / "run.json").write_bytes(orjson.dumps(raw | meta.to_dict()))
    return out


def _curve(steps: list[StepRow]) -> list[dict[str, Any]]:
    return [
        {
            "target_qps": s.target_qps,
            **{
                m: (f.value if (f := s.latency.get(m)) is not None else None) for m in CHART_METRICS
            },
        }
        for s in steps
    ]


def summary(report: ReportData, baseline: str, label: str | None) -> dict[str, Any]:
    """What the web UI shows from a ``report.json`` (``report.report_json.read_report``): the
    baseline's per-step latencies, and, when ``label`` was compared, its ratios per step with
    CIs and effects, the verdict and the crossover of the report's metric."""
    out: dict[str, Any] = {
        "metric": report.metric,
        "rule": report.rule,
        "baseline_steps": _curve(report.steps.get(baseline, [])),
        "steps": _curve(report.steps.get(label, [])) if label else [],
        "ratios": [],
        "verdict": None,
        "crossover": None,
    }
    if not label or label not in report.ratios:
        return out
    by_qps: dict[float, dict[str, Any]] = {}
    for metric in UI_METRICS:
        for row in report.ratios[label].get(metric, []):
            r = row.ratio
            cell = {"value": r.value, "lo": r.lo, "hi": r.hi, "effect": row.effect}
            # the change as the report's per-step tables write it (wording.signed_change)
            cell["text"] = signed_change(r)
            by_qps.setdefault(row.target_qps, {"target_qps": row.target_qps})[metric] = cell
    out["ratios"] = [by_qps[q] for q in sorted(by_qps)]
    out["verdict"] = report.verdicts.get(label)
    x = report.crossovers.get(label, {}).get(report.metric)
    if x is not None:
        has_ci = x.ci[0] is not None or x.ci[1] is not None
        out["crossover"] = {
            "status": x.status,
            "qps": x.qps,
            "ci": list(x.ci),
            "last_helping_qps": x.last_helping_qps,
            "stops_at": x.stops_at.to_dict() if x.stops_at is not None else None,
            "tested_range": list(x.tested_range),
            "ci_text": load_ci_text(x.ci, x.ci_beyond, x.tested_range) if has_ci else "",
        }
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m specload.protocol.provisional",
        description="Compare the settled steps of a run in progress with a baseline run "
        "(what the web UI shows live); writes OUT/report.json.",
    )
    p.add_argument("run_dir", help="the run in progress")
    p.add_argument("baseline_dir", help="a finished run of the same scenario")
    p.add_argument("out", help="a scratch folder: OUT/view and OUT/report.json")
    p.add_argument("--steps", default="", help="settled step indexes, comma-separated")
    p.add_argument("--baseline", required=True, help="the baseline run's label")
    p.add_argument("--bootstrap", type=int, default=1000)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Write the view and the comparison's report.json; exit code as ``specload compare``."""
    args = _args(argv)
    from specload.analysis.compare import compare_runs
    from specload.report import write_reports

    out = Path(args.out)
    steps = {int(s) for s in args.steps.split(",") if s.strip()}
    dirs: list[str | Path] = [Path(args.baseline_dir)]
    try:
        if steps:
            dirs.append(write_view(args.run_dir, out / "view", steps))
        comparison = compare_runs(dirs, baseline=args.baseline, bootstrap=args.bootstrap)
        write_reports(comparison, out, html=False)
    except SpecloadError as exc:
        print(f"specload: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
