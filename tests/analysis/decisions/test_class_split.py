"""Classes that disagree lead the answer (``analysis/decisions/class_split.py``): the verdict names
each class and what to route where, and no advice line turns off what it keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.synth_rundir import SPEC, Cond, rewrite_records, with_classes, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.comparison import Comparison
from specload.analysis.decisions.class_split import ClassEffect, ClassSplit, class_split
from specload.analysis.statistics.effect import HELPS, HURTS, SAME
from specload.analysis.statistics.ratios import RatioRow
from specload.analysis.statistics.stats import Estimate
from specload.report.advice import advice_for
from specload.report.model import build_report
from specload.report.schedule_tables import proposal_lines
from specload.report.verdict_words import split_headline, verdicts

QPS = (2, 4, 8, 12)


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    """Code 18 % faster, questions 20 % slower: overall no decision."""
    d = tmp_path_factory.mktemp("split")
    base = with_classes(write_run(d / "base", Cond("baseline"), qps=QPS))
    spec = with_classes(write_run(d / "spec", Cond("spec", speculative=SPEC), qps=QPS), 0.82, 1.2)
    return compare_runs([base, spec], bootstrap=200)


def test_the_verdict_leads_with_each_class_and_where_to_route_it(split: Comparison) -> None:
    head, _, overall = verdicts(split)["spec"].partition(". Overall: ")
    assert head.startswith("spec helps code (p50 TPOT -1") and " and hurts questions (+" in head
    assert head.endswith(
        "at every tested load: route code to a drafting pool and the rest to baseline"
    )
    assert overall.startswith("spec: no decision yet on p50 TPOT")


def test_no_advice_turns_off_what_the_class_answer_keeps(split: Comparison) -> None:
    advice = advice_for(split)
    assert advice[0].kind == "by_class" and "`code`" in advice[0].text
    assert not [a for a in advice if a.kind == "off"]
    lines = [text for text, _ in proposal_lines(build_report(split))]
    assert lines == ["spec: no schedule proposed: its classes disagree"]


def test_classes_that_agree_keep_the_overall_verdict(tmp_path: Path) -> None:
    base = with_classes(write_run(tmp_path / "b", Cond("baseline"), qps=QPS, n=120))
    spec = with_classes(write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=QPS, n=120))
    c = compare_runs([base, spec], bootstrap=200)
    assert class_split("spec", c.baseline, c.classes, c.metric) is None
    assert "Overall:" not in verdicts(c)["spec"] and "route" not in verdicts(c)["spec"]


def _rows(*effects: str) -> tuple[RatioRow, ...]:
    """A class's rows at 2, 4, 8, 12 req/s with these effects (the ratios do not matter)."""
    return tuple(
        RatioRow("ngram", "tpot_p50", q, Estimate(1.0, 0.9, 1.1), e)
        for q, e in zip(QPS, effects, strict=True)
    )


def test_classes_with_one_answer_at_the_same_loads_share_a_clause() -> None:
    hurt = _rows(HURTS, HURTS, HURTS, HURTS)
    split = ClassSplit(
        "ngram",
        "baseline",
        "tpot_p50",
        (ClassEffect("code", _rows(HELPS, SAME, HELPS, SAME), -0.254, None, (2.0, 8.0)),),
        (
            ClassEffect("qa", hurt, None, 0.399),
            ClassEffect("summary", hurt, None, 0.41),
            ClassEffect("chat", _rows(SAME, SAME, SAME, SAME), None, None),
        ),
        "a drafting pool",
    )
    assert split_headline(split) == (
        "ngram helps code (p50 TPOT -25 %) at 2, 8 req/s, hurts qa (+40 %) and summary (+41 %) "
        "at every tested load and does not help chat: route code to a "
        "drafting pool and the rest to baseline"
    )


def _with_small_class(run: Path, every: int = 25) -> Path:
    """A third class, ``summary``, of about one request in ``every``: too few to decide."""

    def summary(r: dict[str, Any]) -> None:
        if r["prompt_index"] % every == 1:
            r["category"] = "summary"

    return rewrite_records(run, summary)


def test_a_class_too_small_to_decide_is_said_so_with_its_size_and_never_routed(
    tmp_path: Path,
) -> None:
    base = _with_small_class(with_classes(write_run(tmp_path / "b", Cond("baseline"), qps=QPS)))
    spec = write_run(tmp_path / "s", Cond("spec", speculative=SPEC), qps=QPS)
    spec = _with_small_class(with_classes(spec, 0.82, 1.2))
    c = compare_runs([base, spec], bootstrap=200)
    split = class_split("spec", c.baseline, c.classes, c.metric)
    assert split is not None and [e.name for e in split.gain] == ["code"]
    ((name, n),) = split.small
    assert name == "summary" and 0 < n < 20 * len(QPS)
    head = split_headline(split)
    assert f"too few summary requests to decide ({n}, fewer than 20 at every step)" in head
    assert head.endswith("route code to a pool running spec and the rest to baseline")
    small_only = [a for a in c.classes if a.name in ("code", "summary")]  # nothing to split
    assert class_split("spec", c.baseline, small_only, c.metric) is None
