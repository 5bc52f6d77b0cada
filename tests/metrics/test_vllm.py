"""vLLM metric names → per-step acceptance, prefix hits, KV and queue figures."""

from __future__ import annotations

import pytest

from specload.metrics.vllm import per_step_server_metrics, step_server_metrics


def _scrape(
    drafts: float, draft_tokens: float, accepted: float, pos: list[float], **gauges: float
) -> dict[str, float]:
    v = {
        # two engines: values must be summed over the engine / model_name labels
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"}': drafts / 2,
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"}': drafts / 2,
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"}': draft_tokens,
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"}': accepted,
        'vllm:prefix_cache_queries_total{model_name="m"}': gauges.pop("queries", 0.0),
        'vllm:prefix_cache_hits_total{model_name="m"}': gauges.pop("hits", 0.0),
    }
    for i, x in enumerate(pos):
        v[
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}}'
        ] = x
    for name, value in gauges.items():
        v[f'vllm:{name}{{model_name="m"}}'] = value
    return v


def test_step_deltas_give_acceptance_rate_length_positions_and_prefix_hits() -> None:
    start = _scrape(
        100, 400, 200, [90, 60, 30, 20], queries=1000, hits=100, kv_cache_usage_perc=0.1
    )
    mid = _scrape(150, 600, 300, [130, 90, 50, 30], num_requests_waiting=4, kv_cache_usage_perc=0.7)
    end = _scrape(
        200,
        800,
        500,
        [180, 140, 100, 80],
        queries=3000,
        hits=1100,
        kv_cache_usage_perc=0.2,
        num_requests_running=5,
    )
    m = step_server_metrics([start, mid, end])
    assert m.acceptance_rate == pytest.approx(300 / 400)
    assert m.acceptance_length == pytest.approx(1 + 300 / 100)
    assert m.per_position == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert m.prefix_hit_rate == pytest.approx(1000 / 2000)
    assert m.kv_usage_max == pytest.approx(0.7)
    assert m.waiting_max == 4 and m.running_max == 5


def test_server_without_spec_metrics_gives_none_not_errors() -> None:
    m = step_server_metrics(
        [{"vllm:num_requests_running": 1.0}, {"vllm:num_requests_running": 2.0}]
    )
    assert m.acceptance_rate is None and m.acceptance_length is None and m.per_position is None
    assert m.prefix_hit_rate is None and m.running_max == 2.0
    assert step_server_metrics([]).kv_usage_max is None


def test_counter_reset_mid_step_gives_none_instead_of_negative() -> None:
    start = _scrape(100, 400, 200, [])
    end = _scrape(10, 40, 20, [])
    assert step_server_metrics([start, end]).acceptance_rate is None


def test_old_vllm_gpu_names_are_read_as_fallbacks() -> None:
    a = {
        "vllm:gpu_prefix_cache_queries_total": 10.0,
        "vllm:gpu_prefix_cache_hits_total": 1.0,
        "vllm:gpu_cache_usage_perc": 0.3,
    }
    b = {
        "vllm:gpu_prefix_cache_queries_total": 30.0,
        "vllm:gpu_prefix_cache_hits_total": 11.0,
        "vllm:gpu_cache_usage_perc": 0.5,
    }
    m = step_server_metrics([a, b])
    assert m.prefix_hit_rate == pytest.approx(0.5) and m.kv_usage_max == 0.5


def test_metrics_lines_group_by_step_and_phase() -> None:
    lines = [
        {"t": 1.0, "step": 0, "phase": "start", "values": _scrape(0, 0, 0, [])},
        {"t": 2.0, "step": 0, "phase": "interval", "values": _scrape(5, 20, 10, [])},
        {"t": 3.0, "step": 0, "phase": "end", "values": _scrape(10, 40, 30, [])},
        {"t": 3.0, "step": 1, "phase": "start", "values": _scrape(10, 40, 30, [])},
        {"t": 3.5, "step": None, "phase": "interval", "values": {}},
    ]
    out = per_step_server_metrics(lines)
    assert set(out) == {0, 1}
    assert out[0].acceptance_rate == pytest.approx(30 / 40)
    assert out[1].acceptance_rate is None  # no end scrape yet
