"""JUnit XML of a comparison: what CI systems (GitHub Actions test reporters, GitLab's
``artifacts:reports:junit``, Jenkins) read to show a pass or a failure without parsing logs.

One ``testsuite`` named ``specload``; one ``testcase`` per gate and condition (``--max-
regression METRIC=PCT``), failing with a ``failure`` element per failed check (the same
message ``compare`` prints), a possible regression in its ``system-out``; and one
``testcase`` per condition's verdict, with the verdict sentence, failing only when the
condition has no complete step to compare (compare's exit 1). Pass/fail is ``compare``'s
exit code, test by test: nothing here judges anything of its own.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from specload.analysis.comparison import Comparison
from specload.analysis.gates import CAPACITY_GATE, GateFailure

__all__ = ["junit_xml", "write_junit"]

SUITE = "specload"


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def _gate_name(metric: str, max_pct: float, operating_qps: float | None) -> str:
    """What the gate allows, as its testcase is named: "tpot_p95 at most +10 % up to 8
    req/s", "capacity loses at most 10 %"."""
    if metric == CAPACITY_GATE:
        return f"capacity loses at most {max_pct:g} %"
    unit = " pp" if metric == "error_rate" else " %"
    scope = f" up to {operating_qps:g} req/s" if operating_qps is not None else ""
    return f"{metric} at most +{max_pct:g}{unit}{scope}"


def _gate_cases(suite: ET.Element, c: Comparison, conditions: list[str]) -> None:
    result = c.gates
    if result is None:
        return
    for gate in result.gates:
        for cond in conditions:
            case = _case(
                suite,
                f"{SUITE}.gate.{cond}",
                _gate_name(gate.metric, gate.max_pct, result.operating_qps),
            )
            mine = [f for f in result.failures if (f.condition, f.metric) == (cond, gate.metric)]
            for f in mine:
                ET.SubElement(
                    case, "failure", message=f.message(), type="gate failed"
                ).text = f.message()
            maybe: list[GateFailure] = [
                f for f in result.possible if (f.condition, f.metric) == (cond, gate.metric)
            ]
            if maybe:
                ET.SubElement(case, "system-out").text = "\n".join(f.message() for f in maybe)


def _verdict_cases(suite: ET.Element, c: Comparison, conditions: list[str]) -> None:
    for cond in conditions:
        case = _case(suite, f"{SUITE}.verdict", cond)
        sentence = c.verdicts.get(cond, "")
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
    _gate_cases(suite, c, conditions)
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
