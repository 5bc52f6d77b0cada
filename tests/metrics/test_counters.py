"""One counter-delta rule: the live figures and the report agree when the server restarts."""

from __future__ import annotations

from specload.analysis.inputs.server import server_steps
from specload.metrics.counters import counter_delta, counter_deltas
from specload.metrics.histogram import bucket_deltas
from specload.metrics.vllm import step_server_metrics

DRAFTS = 'vllm:spec_decode_num_drafts_total{model_name="m"}'
DRAFT_TOKENS = 'vllm:spec_decode_num_draft_tokens_total{model_name="m"}'
ACCEPTED = 'vllm:spec_decode_num_accepted_tokens_total{model_name="m"}'


def test_counter_delta_rules() -> None:
    assert counter_delta(10.0, 25.0) == 15.0
    assert counter_delta(None, 7.0) == 7.0  # a series created during the step
    assert counter_delta(10.0, None) is None
    assert counter_delta(100.0, 3.0) is None  # reset: unknown, not 3 and not -97
    deltas, resets = counter_deltas({"a": 1.0, "b": 9.0}, {"a": 4.0, "b": 2.0, "c": 5.0}, "abc")
    assert deltas == {"a": 3.0, "c": 5.0} and resets == ["b"]


def _scrape(t: float, phase: str, drafts: float, accepted: float) -> dict:
    values = {DRAFTS: drafts, DRAFT_TOKENS: 4 * drafts, ACCEPTED: accepted}
    return {"t": t, "step": 0, "phase": phase, "values": values}


def test_live_and_report_agree_across_a_server_restart() -> None:
    step = {"index": 0, "target_qps": 4.0, "start": 0.0, "warmup_end": 0.0, "end": 10.0}
    steady = [_scrape(0.0, "start", 100, 200), _scrape(10.0, "end", 150, 300)]
    restarted = [_scrape(0.0, "start", 100, 200), _scrape(10.0, "end", 20, 30)]
    for scrapes, expected in ((steady, 100 / 200), (restarted, None)):
        live = step_server_metrics([s["values"] for s in scrapes]).acceptance_rate
        report = server_steps([(scrapes, [step])])[4.0].acceptance_rate
        assert live == report == expected


def test_a_histogram_reset_in_the_window_makes_it_unknown() -> None:
    start = {'h_bucket{le="0.1"}': 50.0, 'h_bucket{le="+Inf"}': 60.0}
    end = {'h_bucket{le="0.1"}': 5.0, 'h_bucket{le="+Inf"}': 8.0}
    assert bucket_deltas(start, end, "h") == []
    assert bucket_deltas(end, start, "h") == [(0.1, 45.0), (float("inf"), 52.0)]


def test_a_restart_is_told_by_the_start_time_or_a_count_going_back_anywhere_in_the_step() -> None:
    from specload.metrics.counters import START_TIME, restarted

    t = {START_TIME: 1000.0}
    steady = [{**t, "a_total": 1.0}, {**t, "a_total": 4.0}, {**t, "a_total": 9.0}]
    assert not restarted(steady) and not restarted(steady[:1]) and not restarted([])
    # restarted and grown past the start value by the end: a start-to-end delta hides it,
    # the pair in the middle does not
    dip = [{"a_total": 5.0}, {"a_total": 1.0}, {"a_total": 9.0}]
    assert counter_deltas(dip[0], dip[-1], ["a_total"]) == ({"a_total": 4.0}, [])
    assert restarted(dip)
    # no count went back, but the process is another one
    assert restarted([{**t, "a_total": 1.0}, {START_TIME: 1005.0, "a_total": 2.0}])
    assert restarted([{"h_count": 3.0}, {"h_count": 1.0}])
    assert restarted([{'h_bucket{le="1"}': 3.0}, {'h_bucket{le="1"}': 1.0}])
    # a histogram's sum may shrink (negative observations): not a restart; a gauge neither
    assert not restarted([{"h_sum": 3.0, "g": 5.0}, {"h_sum": 2.5, "g": 1.0}])
