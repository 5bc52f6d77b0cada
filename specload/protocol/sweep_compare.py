"""The end of a sweep: the run dirs it left in its folder, the comparison of them
(``specload compare``), and the lines that say how it went.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from specload.protocol.argv import compare_argv
from specload.protocol.sweep_plan import ConditionResult, SweepPlan
from specload.recorder.rundir import peek_run_meta
from specload.report.report_json import REPORT_JSON, read_report

__all__ = ["baseline_line", "compare_sweep", "degraded_lines", "label", "sweep_run_dirs"]


def degraded_lines(results: Sequence[ConditionResult]) -> list[str]:
    """One line per ``degraded`` run with its reasons from run.json (for the sweep's end)."""
    lines = []
    for r in results:
        if r.status != "degraded":
            continue
        meta = peek_run_meta(r.run_dir)
        reasons = meta.degraded if meta is not None else []
        lines.append(
            f"{r.condition.name} degraded ({r.run_dir}): "
            + ("; ".join(map(str, reasons)) or "see its run.json")
        )
    return lines


def sweep_run_dirs(out: Path) -> list[Path]:
    """Every run dir directly under ``out`` (this sweep's and earlier ``--url`` ones)."""
    return sorted(p.parent for p in out.glob("*/run.json") if p.parent.name != "report")


def baseline_line(plan: SweepPlan) -> str:
    """The sweep's first line: which condition every change will be read against."""
    others = [c.name for c in plan.conditions if c.name != plan.baseline]
    measured = f"; measured against it: {', '.join(others)}" if others else ""
    return f"[sweep] baseline: {plan.baseline}{measured}"


def compare_sweep(
    out: Path,
    run_dirs: Sequence[Path],
    say: Callable[[str], None] = print,
    compare_args: Sequence[str] = (),
    baseline: str | None = None,
) -> int:
    """Compare the sweep's runs with ``specload compare`` into ``out/report``; its exit code.

    Runs already in ``out`` from earlier invocations (``--url``, one condition each) are
    compared too. ``baseline``: the plan's (``SweepPlan.baseline``), else compare's rule over
    the runs in the order they were added. A single ``--url`` run is listed after the ones
    already there, so the report's order is the order conditions were added. ``compare_args``
    are extra ``specload compare`` options. Ends with the one-sentence verdict and the HTML
    report's path, so they are the last lines on the terminal after the tables.
    """
    earlier = sorted(
        (d for d in sweep_run_dirs(out) if d not in run_dirs),
        key=lambda d: (m.started_at or 0.0) if (m := peek_run_meta(d)) is not None else 0.0,
    )
    # one ``--url`` condition joins the runs already there, last (the order they were added)
    dirs = list(run_dirs) + earlier if len(run_dirs) > 1 else earlier + list(run_dirs)
    if len(dirs) < 2:
        say(f"[sweep] one run in {out}; measure another condition into it to compare")
        return 0
    report_dir = out / "report"
    cmd = compare_argv(dirs, report_dir, baseline=baseline, flags=compare_args)
    against = f" against the baseline {baseline}" if baseline else ""
    say(f"[sweep] comparing {len(dirs)} runs{against} -> {report_dir}")
    code = subprocess.call(cmd)
    # compare writes its files, then exits 0 or 1 (a gate failed, nothing comparable); with
    # another code a report.json there is an earlier comparison's, not these runs'
    written = code in (0, 1) and (report_dir / REPORT_JSON).is_file()
    if written and (headline := read_report(report_dir).headline):
        say(f"\nVerdict: {headline}")
    if (report_dir / "report.html").is_file():
        say(f"Report:  {report_dir / 'report.html'}")
    return code


def label(run_dir: Path) -> str:
    meta = peek_run_meta(run_dir)
    return (meta.label if meta is not None else "") or run_dir.name
