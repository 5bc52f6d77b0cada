"""``Report``: the one input every renderer (terminal, Markdown, JSON, HTML) takes.

A report is a ``Comparison`` plus what a reader needs around it: when and by which version
it was made, the headline, the run metadata in display form, the findings worth a second
look (flags, warnings, contract issues, comparability overrides) and the exit status the CI
gates imply. Renderers never reach back into run directories.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specload import __version__
from specload.analysis.comparison import Comparison
from specload.analysis.decisions.crossover import Crossover
from specload.report.advice_rules import Advice
from specload.report.compare_words import (
    comparison_warnings,
    difference_text,
    host_difference_text,
)
from specload.report.contract_words import contract_issues
from specload.report.crossover_words import split_text
from specload.report.finding_words import disagreement_message, flag_message
from specload.report.gate_words import gate_message, skipped_line
from specload.report.regime_words import spread_line
from specload.report.rule_words import incomplete_text
from specload.report.verdict_words import class_verdicts, verdict_lines, verdicts
from specload.report.wording import metric_label

__all__ = ["Report", "RunRow", "build_report"]


@dataclass(slots=True)
class RunRow:
    """One condition's metadata in display form (strings, "—" when unknown)."""

    label: str
    role: str
    runs: int
    server_version: str
    model: str
    speculative: str
    prefix_caching: str
    lengths: str
    concurrency: str
    status: str


#: Findings on a report's first screen, after the verdicts; the rest are folded in a section
#: ("N more findings"): fourteen banners before the recommendations buried the answer.
FIRST_FINDINGS = 3


@dataclass(slots=True)
class Report:
    title: str
    generated_at: str
    specload_version: str
    comparison: Comparison
    headline: str
    runs: list[RunRow]
    findings: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    exit_code: int = 0
    #: each condition's verdict (``verdict_words.verdicts``), worded once for every output
    verdicts: dict[str, str] = field(default_factory=dict)
    #: the same per class of request: class name -> condition -> verdict
    class_verdicts: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def first_findings(self) -> list[str]:
        """The findings shown on the first screen (``FIRST_FINDINGS``, in order)."""
        return self.findings[:FIRST_FINDINGS]

    @property
    def more_findings(self) -> list[str]:
        """The findings folded under "N more findings"."""
        return self.findings[FIRST_FINDINGS:]


def _s(v: Any) -> str:
    return "—" if v in (None, "", [], {}) else str(v)


def _lengths(sc: dict[str, Any]) -> str:
    """ "in 512 / out 256 / shared prefix 256"; a prompt file or a trace by name (their lengths
    are per prompt), a length distribution by its kind. Reads the scenario's nested
    ``prompts.synthetic`` (today's run.json) and the older flat ``prompts`` alike."""
    prompts = sc.get("prompts") or {}
    if not isinstance(prompts, dict):
        prompts = {}
    nested = prompts.get("synthetic")
    spec: dict[str, Any] = nested if isinstance(nested, dict) else prompts
    inp: Any = spec.get("input_tokens")
    if isinstance(inp, dict):
        inp = inp.get("dist") or "varied"
    if inp is None and isinstance(prompts.get("file"), str):
        inp = f"file {Path(prompts['file']).name}"
    if inp is None and sc.get("trace"):
        inp = f"trace {Path(str(sc['trace'])).name}"
    shared = spec.get("shared_prefix_tokens")
    out = sc.get("max_tokens") or (sc.get("sampling") or {}).get("max_tokens")
    if isinstance(out, dict):
        out = out.get("dist") or "varied"
    parts = [f"in {_s(inp)}", f"out {_s(out)}"]
    if shared:
        parts.append(f"shared prefix {shared}")
    return " / ".join(parts)


_SOURCE = {"declared": "declared", "server": "from /metrics"}


def _feature_cell(value: Any, source: str) -> str:
    """ "on (declared)", "off (from /metrics)", "unknown"."""
    if value is None:
        return "unknown"
    shown = json.dumps(value, sort_keys=True) if isinstance(value, dict) else (
        "on" if value else "off")  # fmt: skip
    return f"{shown} ({_SOURCE.get(source, source)})"


def _row(info: Any) -> RunRow:
    meta = info.meta
    target = meta.target or {}
    sc = meta.scenario or {}
    f = info.features
    spec = _feature_cell(f.speculative, f.source.get("speculative", ""))
    statuses = sorted({str(m) for m in info.statuses})
    workers = meta.workers
    conc = (
        f"max {_s(sc.get('max_concurrency'))}, {len(workers)} worker(s)"
        if workers
        else f"max {_s(sc.get('max_concurrency'))}"
    )
    return RunRow(
        label=info.label,
        role=info.role,
        runs=len(info.runs),
        server_version=_s(target.get("server_version")),
        model=_s(target.get("model") or sc.get("model")),
        speculative=spec,
        prefix_caching=_feature_cell(f.prefix_caching, f.source.get("prefix_caching", "")),
        lengths=_lengths(sc),
        concurrency=conc,
        status=", ".join(statuses),
    )


def _lost_finding(label: str, w: dict[str, Any]) -> str:
    """A worker lost mid-run: when, in which step, and the gap it left in that step."""
    at = w.get("at")
    when = (
        _dt.datetime.fromtimestamp(at, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        if isinstance(at, (int, float))
        else "an unknown time"
    )
    where = f" during the {w['target_qps']:g} QPS step" if w.get("target_qps") is not None else ""
    sent, recorded = w.get("sent"), w.get("recorded")
    lost = (
        f"{sent - recorded} of its {sent} requests have no record"
        if isinstance(sent, int) and isinstance(recorded, int)
        else f"sent {sent}, recorded {recorded}"
    )
    return (
        f"{label} ({w.get('run')}): worker {w.get('worker')} was lost at {when}{where}: {lost}; "
        "its share of that step was not sent between its death and the re-split, so the "
        "step's achieved QPS is lower and its figures rest on fewer requests"
    )


def _split_finding(x: Crossover) -> str:
    """Server starts that classify a step differently: the words of the verdict and the
    status table's "disagree at" (all three read ``Crossover.split_qps``)."""
    return (
        f"server starts disagree: {x.condition} on {metric_label(x.metric)} {split_text(x)}: "
        "no boundary is claimed"
    )


def _findings(c: Comparison) -> list[str]:
    """What deserves a second look, most decision-relevant first: gates that passed on their
    CI only, server starts that disagree on an effect or differ in level, an engine step with
    two regimes in time, steps left out, then flags, contract issues and warnings."""
    out = [gate_message(f) for f in c.gates.possible] if c.gates is not None else []
    out += [_split_finding(x) for x in c.crossovers if not x.replicates_agree]
    out += [disagreement_message(d) for d in c.disagreements]
    # an engine step that flips between two regimes in time decides its steps' ratios by when
    # they were measured: said here, its detail in the Regimes section
    out += [f"{spread_line(s)} (Regimes, below)" for s in c.regimes.spread.values()]
    out += [host_difference_text(d) for d in c.host_differences]
    out += [
        f"{label}: {q:g} req/s left out of every conclusion ({incomplete_text(why)})"
        for label, steps in c.incomplete.items()
        for q, why in steps.items()
    ]
    if c.gates is not None and (skipped := skipped_line(c.gates)):
        out.append(skipped)
    out += [flag_message(f) for f in c.flags]
    out += [
        f"{chk.condition}: output contract: {issue}"
        for chk in c.contract
        for issue in contract_issues(chk)
    ]
    if c.forced:
        out += [f"compared with --force despite: {difference_text(d)}" for d in c.differences]
    out += [_lost_finding(info.label, w) for info in c.conditions for w in info.lost_workers]
    out += comparison_warnings(c)
    return out


def _title(c: Comparison) -> str:
    """The report's first line names the baseline: every change below is read against it."""
    others = [i.label for i in c.conditions if i.label != c.baseline]
    if not others:
        return f"specload: {c.baseline}"
    return f"specload: {', '.join(others)} vs {c.baseline} (the baseline)"


def build_report(comparison: Comparison, *, title: str | None = None) -> Report:
    """Wrap a comparison for rendering; exit code 1 when a CI gate failed."""
    from specload.report.advice import advice_for

    c = comparison
    said = verdicts(c)
    return Report(
        title=title or _title(c),
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        specload_version=__version__,
        comparison=c,
        headline=verdict_lines(said)[0],
        runs=[_row(i) for i in c.conditions],
        findings=_findings(c),
        advice=advice_for(c),
        exit_code=_exit_code(c),
        verdicts=said,
        class_verdicts={a.name: class_verdicts(c, a) for a in c.classes},
    )


def _exit_code(c: Comparison) -> int:
    """1 when a gate failed or a condition has no complete step to compare (a comparison
    that measured nothing useful never exits 0); else 0."""
    if c.gates is not None and not c.gates.passed:
        return 1
    if any(c.crossover(label, c.metric) is None for label in c.ratios):
        return 1
    return 0
