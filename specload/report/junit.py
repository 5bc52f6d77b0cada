"""JUnit XML of a comparison: what CI systems (GitHub Actions test reporters, GitLab's
``artifacts:reports:junit``, Jenkins) read to show a pass or a failure without parsing logs.

One ``testsuite`` named ``specload``; one ``testcase`` per gate check (``--max-regression
METRIC=PCT``: each condition at each step in scope), failing with one ``failure`` element
(the same message ``compare`` prints), a pass or a possible regression in its
``system-out``; and one
``testcase`` per condition's verdict, with the verdict sentence, failing only when the
condition has no complete step to compare (compare's exit 1). Pass/fail is ``compare``'s
exit code, test by test: nothing here judges anything of its own.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from specload.analysis.comparison import Comparison
from specload.analysis.decisions.gates import CAPACITY_GATE, FAILED, POSSIBLE, GateFailure
from specload.report.gate_words import gate_message, passed_message
from specload.report.verdict_words import verdicts

__all__ = ["error_junit_xml", "junit_xml", "write_error_junit", "write_junit"]

SUITE = "specload"


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def _gate_name(f: GateFailure) -> str:
    """One check, as its testcase is named: "tpot_p95 at most +10 % at 8 req/s", "capacity
    loses at most 10 %"."""
    if f.metric == CAPACITY_GATE:
        return f"capacity loses at most {f.max_pct:g} %"
    unit = " pp" if f.metric == "error_rate" else " %"
    return f"{f.metric} at most +{f.max_pct:g}{unit} at {f.target_qps:g} req/s"


def _gate_cases(suite: ET.Element, c: Comparison) -> None:
    """One testcase per check (gate, condition, step), with at most one ``failure``: some
    JUnit viewers show only a testcase's first."""
    result = c.gates
    if result is None:
        return
    for outcome, f in result.checks:
        case = _case(suite, f"{SUITE}.gate.{f.condition}", _gate_name(f))
        if outcome == FAILED:
            ET.SubElement(
                case, "failure", message=gate_message(f), type="gate failed"
            ).text = gate_message(f)
        else:
            text = gate_message(f) if outcome == POSSIBLE else passed_message(f)
            ET.SubElement(case, "system-out").text = text


def _verdict_cases(suite: ET.Element, c: Comparison, conditions: list[str]) -> None:
    for cond in conditions:
        case = _case(suite, f"{SUITE}.verdict", cond)
        sentence = verdicts(c).get(cond, "")
        ET.SubElement(case, "system-out").text = sentence
        if c.crossover(cond, c.metric) is None:
            ET.SubElement(
                case, "failure", message=sentence, type="nothing to compare"
            ).text = sentence


def junit_xml(c: Comparison) -> str:
    """The comparison's gates and verdicts as a JUnit XML document."""
    conditions = list(c.ratios)
    root = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(root, "testsuite", name=SUITE)
    _gate_cases(suite, c)
    _verdict_cases(suite, c, conditions)
    cases = suite.findall("testcase")
    failed = sum(1 for x in cases if x.find("failure") is not None)
    for el in (root, suite):
        el.set("tests", str(len(cases)))
        el.set("failures", str(failed))
        el.set("errors", "0")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(c: Comparison, path: str | Path) -> Path:
    """Write ``junit_xml(c)`` to ``path`` (its folder made); the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(junit_xml(c), encoding="utf-8")
    return p


def error_junit_xml(message: str) -> str:
    """A JUnit document for a run whose gates could not be checked (exit 2): one testcase
    with an ``error`` naming the cause, so a CI's test view shows why instead of nothing."""
    root = ET.Element("testsuites", name=SUITE, tests="1", failures="0", errors="1")
    suite = ET.SubElement(root, "testsuite", name=SUITE, tests="1", failures="0", errors="1")
    case = _case(suite, f"{SUITE}.gates", "gates checked")
    ET.SubElement(case, "error", message=message, type="gates not checked").text = message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_error_junit(path: str | Path, message: str) -> Path | None:
    """Write ``error_junit_xml(message)`` to ``path`` (its folder made); None when it cannot
    be written (the error being reported is the one that matters)."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(error_junit_xml(message), encoding="utf-8")
    except OSError:
        return None
    return p
