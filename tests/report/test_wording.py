"""How figures read (``report/wording.py``), golden: the verdict, the advice, the sweep's
looks and the web UI all quote these."""

from __future__ import annotations

from specload.report.wording import step_name, to_decide_text


def test_the_time_to_decide_reads_the_same_everywhere() -> None:
    assert to_decide_text([(4.0, 200.0), (12.0, 340.0)]) == (
        "undecided at 4, 12 req/s; about 9 min more measurement there would likely decide them"
    )
    assert to_decide_text([("c=1", 30.0), (8.0, 20.0)]) == (
        "undecided at c=1, 8 req/s; about 50 s more measurement there would likely decide them"
    )
    assert "cannot be said" in to_decide_text([(4.0, None)])
    assert to_decide_text([(16.0, 7.6 * 3600)]).endswith(
        "about 7.6 h more measurement there would likely decide it"
    )
    assert to_decide_text([(16.0, 12.4 * 3600)]).endswith(
        "about 12 h more measurement there would likely decide it"
    )
    # a forecast past a day (an estimate near the line it must clear) gives no figure
    far = to_decide_text([(16.0, 470.7 * 3600)])
    assert (
        far.startswith("undecided at 16 req/s; more than a day of measurement") and " h" not in far
    )
    assert to_decide_text([]) == ""


def test_a_step_by_what_it_asks_for() -> None:
    assert step_name(8.0) == "8 req/s"
    assert step_name(0.0, 8) == "concurrency 8"
    assert step_name(0.0, 8, short=True) == "c=8"
