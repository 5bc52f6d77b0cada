"""The web UI's answer while the run goes: this run against a baseline run, step by step.

With ``--baseline-run DIR`` (or the start form's field) the master loads a finished run of
the same scenario. Each time a step settles (it has ended and every request sent in it has
its record) it re-runs the provisional comparison (``specload.protocol.provisional``, a child
process: the same rule and code as ``specload compare``) over the settled steps, and keeps
the few figures the specload tab shows, taken from the child's ``report.json`` (read typed by
``report.report_json.read_report``) by ``summary``: the per-step latencies of both runs, the
ratios with CIs, the verdict so far, the crossover. When
the run ends, one last comparison covers every step, and ``make_report`` writes the full
comparison (``specload compare``'s files) for the UI's Report button.

Problems never stop the run: a baseline with this run's label (``compare`` would pool the
two as replicates), a baseline of another scenario (``blocked``: no comparison at all), a
comparison that fails (``problem`` until the next one succeeds: one bad update never stops
the later ones): each is shown as a banner, and the run goes on. When the run ends the
comparison is final whatever happened (``final``); ``failure`` then says why it gave no
answer, which headless is a non-zero exit with that reason.
"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess

from specload.analysis.statistics.effect import EFFECTS
from specload.core.errors import ConfigError
from specload.protocol.argv import compare_argv
from specload.recorder.baseline_run import Baseline
from specload.report.baseline_words import baseline_problem
from specload.report.report_json import ReportData, StepRow, read_report
from specload.report.rule_words import effect_text
from specload.report.wording import load_ci_text, signed_change

__all__ = ["UI_METRICS", "LiveComparison", "ReportJob", "summary"]

log = logging.getLogger("specload")

#: Bootstrap replicates of a provisional comparison (``compare``'s default).
BOOTSTRAP = 1000
#: Seconds a comparison child may take before it is given up (and reported).
JOB_TIMEOUT_S = 300.0
#: The ratios the web UI shows per step (the issue's four: p50/p95 TPOT, p50 TTFT, p50 E2E).
UI_METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "e2e_p50")
#: Per-step latencies the UI charts for both conditions.
CHART_METRICS = ("tpot_p50", "tpot_p95", "ttft_p50", "ttft_p95")


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


def last_message(text: str) -> str:
    """The last message a child printed, on one line: from its last ``specload...:`` line on
    (a not-comparable error is a head line and one line per key; the key alone says little),
    without the program's name (the banner says who failed)."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    if not lines:
        return "no message"
    heads = [i for i, x in enumerate(lines) if x.startswith("specload")]
    said = lines[heads[-1] if heads else -1 :]
    out = re.sub(r"^specload[\w .-]*: (error: )?", "", said[0])
    for line in said[1:]:  # "N keys differ:" then one line per key
        out += (" " if out.endswith(":") else "; ") + line
    return out


def _run_child(argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` (cooperatively, off the event loop's CPU): its exit code, stdout and
    stderr; code -1 when it ran past ``JOB_TIMEOUT_S``."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, "", f"took over {JOB_TIMEOUT_S:g} s and was given up"
    return proc.returncode, proc.stdout or "", proc.stderr or ""


def _child(*args: str) -> tuple[int, str]:
    """``python -m ARGS`` (``_run_child``): its exit code and the last message it printed on
    stderr (else stdout)."""
    code, out, err = _run_child([sys.executable, "-m", *args])
    return code, last_message(err or out)


class ReportJob:
    """The full comparison (``specload compare``'s files) of a finished run, on request (the
    UI's Report button), or at the end of a headless run with gates (``options/gates.py``)."""

    def __init__(self) -> None:
        self.state = "none"  # none | running | ready | failed
        self.out: Path | None = None
        self.problem: str | None = None
        self.greenlet: gevent.Greenlet | None = None
        #: compare's exit code (1: a gate failed or nothing comparable; 2: bad input)
        self.code: int | None = None
        #: what compare said on stderr (gate failures, possible regressions), line by line
        self.said: list[str] = []

    def start(
        self, run_dirs: list[Path], out: Path, baseline: str | None, extra: tuple[str, ...] = ()
    ) -> None:
        """Run ``specload compare`` (``extra``: more of its options) in a child process;
        ``state`` says how it went."""
        if self.state == "running":
            return
        self.state, self.out, self.problem = "running", out, None
        self.greenlet = gevent.spawn(self._run, run_dirs, out, baseline, extra)

    def _run(
        self, run_dirs: list[Path], out: Path, baseline: str | None, extra: tuple[str, ...]
    ) -> None:
        argv = compare_argv(run_dirs, out, baseline=baseline, flags=["--quiet", *extra])
        code, stdout, stderr = _run_child(argv)
        self.code = code
        self.said = [x for x in stderr.splitlines() if x.strip()]
        # exit 1 is a verdict (a gate failed, nothing comparable), not a failure: files written
        if code in (0, 1) and (out / "report.html").is_file():
            self.state = "ready"
            print(f"[specload] report: {out / 'report.html'}", flush=True)
        else:
            self.state, self.problem = "failed", f"compare: {last_message(stderr or stdout)}"

    def view(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "path": str(self.out / "report.html") if self.out and self.state == "ready" else None,
            "problem": self.problem,
        }


class LiveComparison:
    """The provisional comparison of one run against its baseline (see module doc)."""

    def __init__(
        self,
        baseline: Baseline,
        run_dir: Path,
        label: str,
        scenario: dict[str, Any],
        say: Callable[[str], None],
    ) -> None:
        self.baseline = baseline
        self.run_dir = run_dir
        self.label = label
        self.say = say
        #: why this baseline cannot be compared at all (fixed at the start)
        self.blocked = baseline_problem(baseline, label, scenario)
        #: what the UI shows: ``blocked``, else why the last comparison failed (None: it worked)
        self.problem = self.blocked
        #: the final comparison gave no answer: why (headless: a non-zero exit)
        self.failure: str | None = None
        self._scratch = tempfile.TemporaryDirectory(prefix="specload-live-")
        self.result: dict[str, Any] | None = None
        self.compared: tuple[int, ...] = ()
        self.final = False
        self.updated_at: float | None = None
        self._job: gevent.Greenlet | None = None
        self._running: tuple[tuple[int, ...], bool] | None = None
        self._wanted: tuple[tuple[int, ...], bool] | None = None
        if self.blocked is None:
            self._launch((), final=False)  # the baseline's own curve, before any step settles

    # --- provisional comparisons ----------------------------------------------------------
    def update(self, settled: set[int], *, final: bool = False) -> None:
        """Compare again when more steps have settled (or the run ended); one child at a time,
        the newest request waits for the one in flight. The final call always ends final."""
        steps = tuple(sorted(settled))
        if self.blocked is not None:
            if final:
                self._end(None, self.blocked)
            return
        if not final and (
            steps == self.compared or (steps, False) in (self._running, self._wanted)
        ):
            return
        if final and steps == self.compared and self.result is not None and self.problem is None:
            self._end(steps, None)
            return
        self._wanted = (steps, final)
        if self._job is None or self._job.dead:
            self._next()

    def _next(self) -> None:
        if self._wanted is None:
            return
        steps, final = self._wanted
        self._wanted = None
        self._launch(steps, final)

    def _launch(self, steps: tuple[int, ...], final: bool) -> None:
        self._running = (steps, final)
        self._job = gevent.spawn(self._compare, steps, final)
        self._job.link(lambda _g: self._next())

    def _compare(self, steps: tuple[int, ...], final: bool) -> None:
        out = Path(self._scratch.name) / f"c{len(steps)}"
        code, said = _child(
            "specload.protocol.provisional", str(self.run_dir), str(self.baseline.path), str(out),
            "--baseline", self.baseline.label, "--steps", ",".join(map(str, steps)),
            "--bootstrap", str(BOOTSTRAP),
        )  # fmt: skip
        self._running = None
        report = None
        if code == 0:
            try:
                report = read_report(out)
            except ConfigError as exc:  # the child's report.json is not one: a failed update
                said = str(exc)
        if report is None:
            why = f"live comparison failed: {said}"
            if why != self.problem and not final:
                self.say(f"vs {self.baseline.label}: {why} (the next step tries again)")
            self.problem = why
            if final:
                self._end(None, why)
            return
        self.result = summary(report, self.baseline.label, self.label if steps else None)
        self.compared, self.updated_at, self.problem = steps, time.time(), None
        if final:
            self._end(steps, None)
        elif steps and self.result.get("verdict"):
            self._say_verdict(steps, "provisional")

    def _say_verdict(self, steps: tuple[int, ...], kind: str) -> None:
        if self.result and self.result.get("verdict"):
            n = f"{len(steps)} step{'s' if len(steps) != 1 else ''}"
            self.say(f"vs {self.baseline.label} ({kind}, {n}): {self.result['verdict']}")

    def _end(self, steps: tuple[int, ...] | None, failure: str | None) -> None:
        """The run ended: the comparison is final, with its verdict line or why it has none."""
        self.final, self.failure = True, failure
        if failure is not None:
            self.say(f"vs {self.baseline.label}: no final comparison: {failure}")
        elif steps:
            self._say_verdict(steps, "final")
        else:
            self.failure = "no step ran to its end with its records: nothing to compare"
            self.say(f"vs {self.baseline.label}: no final comparison: {self.failure}")

    # --- what the UI reads ----------------------------------------------------------------
    @property
    def computing(self) -> bool:
        return (self._job is not None and not self._job.dead) or self._wanted is not None

    def view(self) -> dict[str, Any]:
        """The ``compare`` part of the web UI's JSON (see docs/web-ui.md)."""
        return {
            "baseline": {
                "path": str(self.baseline.path),
                "label": self.baseline.label,
                "run_id": self.baseline.run_id,
            },
            "problem": self.problem,
            "failure": self.failure,
            "computing": self.computing,
            "provisional": not self.final,
            "compared_steps": list(self.compared),
            "updated_at": self.updated_at,
            # the rule's own words for each effect (``analysis/statistics/effect.py``): the UI shows
            # what the report says, never a wording of its own
            "effects": {e: effect_text(e) for e in EFFECTS},
            **(self.result or {"baseline_steps": [], "steps": [], "ratios": [], "verdict": None}),
        }

    def close(self) -> None:
        if self._job is not None:
            self._job.kill(block=False)
        self._scratch.cleanup()
