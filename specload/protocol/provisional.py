"""The comparison of a run still in progress against a finished baseline run.

The web UI shows, while a run goes, its ratios to a baseline run with CIs and the verdict
so far. Those figures must follow the same rule as ``specload compare`` (one rule, one
definition), so they are ``compare``'s own: this module writes a *view* of the live run
directory holding only the steps that have settled (every request of the step has its
record), then compares that view with the baseline by ``compare_runs`` and writes the same
``report.json``. A step still running, or one whose in-flight requests have not returned,
never enters: its tail would be missing, and p95 would read low.

It runs as a child process (``python -m specload.protocol.provisional``) of the Locust
master, so the bootstrap and the reading of ``requests.jsonl`` never hold up the master's
event loop, which paces arrivals in a local run. This module is the child's side only: the
master's side (which steps have settled, when to start a child, the few figures the web UI
takes from its ``report.json``) is ``locust/live_compare.py``, and the baseline run it is
given is read and checked before by ``recorder/baseline_run.py`` and
``report/baseline_words.py``. Exit codes as ``specload compare``: 2 with one line on stderr
on bad input (for example runs that are not comparable).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import orjson

from specload.core.errors import SpecloadError
from specload.recorder.steps_json import STEPS_JSON, read_steps

__all__ = ["main", "write_view"]


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
