"""Server-side figures from metrics.jsonl deltas, and Prometheus-style histogram quantiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.compare import compare_runs
from specload.metrics.histogram import bucket_deltas, histogram_quantile
from specload.metrics.scrape import metric_key, split_key


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.1, 10.0), (0.2, 30.0), (0.4, 40.0), (float("inf"), 40.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(
        0.15
    )  # rank 20: half-way in (0.1, 0.2]
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.04)  # first bucket starts at 0
    assert histogram_quantile(0.9, buckets) == pytest.approx(0.32)  # rank 36: 60 % into (0.2, 0.4]
    assert (
        histogram_quantile(0.99, [(0.1, 1.0), (float("inf"), 10.0)]) == 0.1
    )  # +Inf: highest finite edge
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def test_bucket_deltas_sum_over_model_name_and_engine_labels() -> None:
    start = {'h_bucket{engine="0",le="0.1",model_name="m"}': 5.0}
    end = {
        'h_bucket{engine="0",le="0.1",model_name="m"}': 8.0,
        'h_bucket{engine="1",le="0.1",model_name="m"}': 2.0,
        'h_bucket{engine="0",le="+Inf",model_name="m"}': 9.0,
        'h_count{engine="0",model_name="m"}': 9.0,
    }
    assert bucket_deltas(start, end, "h") == [(0.1, 5.0), (float("inf"), 9.0)]
    # one label parser for every reader: escapes undone, the inverse of metric_key
    assert split_key('a{position="1",x="q\\"z"}') == ("a", {"position": "1", "x": 'q"z'})
    assert split_key(metric_key("a", {"x": 'q"z\\'})) == ("a", {"x": 'q"z\\'})


def test_acceptance_prefix_kv_and_running_come_from_step_deltas(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(4, 16))
    spec = write_run(
        tmp_path / "s",
        Cond(
            "both", speculative=SPEC, prefix_caching=True, acceptance_rate=0.6, prefix_hit_rate=0.4
        ),
        qps=(4, 16),
    )
    cmp = compare_runs([base, spec])
    hi = cmp.steps["both"][1].server
    # The synthetic warm-up traffic accepts 10 %: a 0.6 proves warm-up is excluded.
    assert hi.acceptance_rate == pytest.approx(0.6)
    assert hi.acceptance_length == pytest.approx(1 + 0.6 * 4)
    assert sum(hi.per_position) == pytest.approx(0.6 * 4)
    assert hi.per_position[0] > hi.per_position[-1]
    assert hi.prefix_hit_rate == pytest.approx(0.4)
    assert hi.kv_usage_max == pytest.approx(16 / 40) and hi.running_max == 13.0
    assert cmp.steps["baseline"][0].server.acceptance_rate is None


def test_server_histogram_percentiles_sit_next_to_the_client_figures(tmp_path: Path) -> None:
    run = write_run(tmp_path / "b", Cond("baseline"), qps=(8,), n=500)
    step = compare_runs([run]).steps["baseline"][0]
    client = step.latency["ttft_p50"].value
    server = step.server.latency_s["ttft_p50"]
    assert server < client and client - server < 0.012  # 2 ms wire + bucket interpolation
    assert step.server.latency_s["tpot_p50"] == pytest.approx(
        step.latency["tpot_p50"].value, rel=0.15
    )


def test_run_without_metrics_has_empty_server_columns(tmp_path: Path) -> None:
    run = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), metrics=False)
    assert compare_runs([run]).steps["baseline"][0].server is None


def test_older_vllm_names_are_read_as_fallbacks() -> None:
    from specload.analysis.inputs.server import server_steps

    lab = 'model_name="m"'
    start = {
        f"vllm:gpu_prefix_cache_hits_total{{{lab}}}": 10.0,
        f"vllm:gpu_prefix_cache_queries_total{{{lab}}}": 100.0,
        f"vllm:gpu_cache_usage_perc{{{lab}}}": 0.1,
    }
    end = {
        f"vllm:gpu_prefix_cache_hits_total{{{lab}}}": 40.0,
        f"vllm:gpu_prefix_cache_queries_total{{{lab}}}": 200.0,
        f"vllm:gpu_cache_usage_perc{{{lab}}}": 0.7,
    }
    metrics = [
        {"t": 1.0, "step": 0, "phase": "start", "values": start},
        {"t": 9.0, "step": 0, "phase": "end", "values": end},
    ]
    steps = [
        {"index": 0, "repeat": 0, "target_qps": 2.0, "start": 1.0, "warmup_end": 1.0, "end": 9.0}
    ]
    out = server_steps([(metrics, steps)])[2.0]
    assert out.prefix_hit_rate == pytest.approx(0.3) and out.kv_usage_max == pytest.approx(0.7)
    assert out.acceptance_rate is None


def test_requests_and_gpu_memory_add_up_over_engines_but_kv_usage_does_not() -> None:
    from specload.analysis.inputs.server import server_steps

    def scrape(
        t: float,
        phase: str,
        running: tuple[float, float],
        kv: tuple[float, float],
        gpu: tuple[float, float],
    ) -> dict[str, object]:
        values = {}
        for e in (0, 1):
            values[f'vllm:num_requests_running{{engine="{e}",model_name="m"}}'] = running[e]
            values[f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="m"}}'] = kv[e]
            values[f'specload:gpu_memory_used_mib{{gpu="{e}"}}'] = gpu[e]
        return {"t": t, "step": 0, "phase": phase, "values": values}

    metrics = [
        scrape(0.0, "start", (0, 0), (0.0, 0.0), (1000, 1000)),
        scrape(5.0, "interval", (7, 5), (0.4, 0.6), (1500, 1700)),
        scrape(9.0, "end", (9, 1), (0.5, 0.1), (1600, 1200)),
    ]
    steps = [
        {"index": 0, "repeat": 0, "target_qps": 4.0, "start": 0.0, "warmup_end": 0.0, "end": 9.0}
    ]
    out = server_steps([(metrics, steps)])[4.0]
    assert out.running_max == 12.0  # 7 + 5 at t=5 (not 9, the largest single engine)
    assert out.kv_usage_max == pytest.approx(0.6)
    assert out.gpu_memory_mib_max == 3200.0
    # the live figures (web UI, progress) read KV usage by the same definition: max over
    # engines, never a sum (two engines at 40 % and 60 % are not 100 % full)
    from specload.metrics.vllm import per_step_server_metrics, step_server_metrics

    live = step_server_metrics([m["values"] for m in metrics])
    assert live.kv_usage_max == pytest.approx(out.kv_usage_max)
    assert per_step_server_metrics(metrics)[0].kv_usage_max == pytest.approx(0.6)


def test_histogram_mean_is_sum_over_count_summed_over_labels() -> None:
    from specload.metrics.histogram import histogram_mean

    deltas = {
        'h_sum{engine="0",model_name="m"}': 3.0,
        'h_sum{engine="1",model_name="m"}': 1.0,
        'h_count{engine="0",model_name="m"}': 30.0,
        'h_count{engine="1",model_name="m"}': 10.0,
        'h_bucket{engine="0",le="0.3",model_name="m"}': 30.0,
        'hx_sum{model_name="m"}': 99.0,
    }
    assert histogram_mean(deltas, "h") == pytest.approx((0.1, 40.0))
    assert histogram_mean(deltas, "missing") is None
    assert histogram_mean({"h_sum": 0.0, "h_count": 0.0}, "h") is None  # nothing observed


def test_server_means_come_from_sum_and_count_deltas_of_the_measured_window() -> None:
    """A 150 ms prefill in vLLM's 0.3 s first bucket: the mean says 150, the buckets cannot."""
    from specload.analysis.inputs.server import server_steps

    lab = 'model_name="m"'
    name = "vllm:request_prefill_time_seconds"

    def values(n: float, total: float) -> dict[str, float]:
        return {
            f'{name}_bucket{{le="0.3",{lab}}}': n,
            f'{name}_bucket{{le="+Inf",{lab}}}': n,
            f"{name}_sum{{{lab}}}": total,
            f"{name}_count{{{lab}}}": n,
        }

    metrics = [
        {"t": 0.0, "step": 0, "phase": "start", "values": values(0, 0.0)},
        # warm-up: 10 slow prefills (1 s each) that must not count
        {"t": 2.0, "step": 0, "phase": "interval", "values": values(10, 10.0)},
        {"t": 9.0, "step": 0, "phase": "end", "values": values(110, 10.0 + 100 * 0.15)},
    ]
    steps = [
        {"index": 0, "repeat": 0, "target_qps": 4.0, "start": 0.0, "warmup_end": 2.0, "end": 9.0}
    ]
    out = server_steps([(metrics, steps)])[4.0]
    assert out.mean_s["prefill"] == pytest.approx(0.15)
    assert out.mean_n["prefill"] == 100.0
    assert out.latency_s["prefill_p50"] == pytest.approx(0.15)  # bucket midpoint: luck, not data
    assert "queue" not in out.mean_s  # not exposed: absent, not zero


def test_client_and_server_means_and_decode_step_time_per_step(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(4, 16), n=400)
    spec = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC, acceptance_rate=0.6),
        qps=(4, 16),
        n=400,
    )
    cmp = compare_runs([base, spec], bootstrap=50)
    for label in ("baseline", "spec"):
        for step, dec in zip(cmp.steps[label], cmp.decode[label], strict=True):
            assert dec.target_qps == step.target_qps and dec.n == step.n_ok
            srv = step.server
            # the synthetic server sees TTFT 2 ms earlier than the client, TPOT the same
            assert dec.client_mean_s["ttft"] - srv.mean_s["ttft"] == pytest.approx(0.002)
            assert srv.mean_s["tpot"] == pytest.approx(dec.client_mean_s["tpot"])
            # one ITL observation per chunk gap: the pooled client mean gap is the server's mean
            assert dec.server_itl_mean_s == pytest.approx(dec.chunk_gap_mean_s)
            assert dec.chunk_gap_s == pytest.approx(dec.chunk_gap_mean_s, rel=0.05)
    base_dec, spec_dec = cmp.decode["baseline"][0], cmp.decode["spec"][0]
    assert base_dec.tokens_per_chunk == pytest.approx(1.0)
    assert spec_dec.tokens_per_chunk == pytest.approx(63 / 22)  # 64 tokens in 23 chunks
    # same TPOT, ~2.9 tokens a step: spec's step is ~2.9× as long
    assert spec_dec.chunk_gap_s / base_dec.chunk_gap_s == pytest.approx(63 / 22, rel=0.05)
    # means are exact where buckets are not: server TTFT mean is no bucket edge or midpoint
    assert cmp.steps["baseline"][0].server.mean_s["ttft"] not in (0.05, 0.0625, 0.075)


def test_decode_step_without_server_metrics_still_has_the_client_side(tmp_path: Path) -> None:
    run = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), metrics=False)
    dec = compare_runs([run], bootstrap=20).decode["baseline"][0]
    assert dec.server_itl_mean_s is None and dec.chunk_gap_s is not None
    assert set(dec.client_mean_s) == {"ttft", "tpot", "e2e"}
