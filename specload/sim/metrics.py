"""vLLM-named Prometheus metrics for the simulator, kept as plain numbers on the hot path.

The engine bumps Python ints and bucket lists (a few hundred ns each); a ``prometheus_client``
custom collector turns them into exposition families only when ``/metrics`` is scraped. Names,
bucket bounds and the ``model_name``/``engine`` labels follow vLLM 0.26, so specload's readers
see the same text from the simulator as from a real server.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

__all__ = ["Histogram", "SimMetrics"]

_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_REQ_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
_LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


class Histogram:
    """Cumulative-on-read histogram: ``observe`` is a bisect and two adds."""

    __slots__ = ("bounds", "counts", "doc", "name", "sum")

    def __init__(self, name: str, doc: str, bounds: tuple[float, ...]) -> None:
        self.name, self.doc, self.bounds = name, doc, bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        v = max(0.0, v)  # a duration: a hair below 0 from clock rounding would shrink the sum
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v

    def family(self, labels: list[str], values: list[str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(self.name, self.doc, labels=labels)
        acc = 0
        buckets = []
        for bound, c in zip((*self.bounds, float("inf")), self.counts, strict=False):
            acc += c
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), acc))
        fam.add_metric(values, buckets, self.sum)
        return fam


class SimMetrics:
    """All counters, gauges and histograms the simulator exposes."""

    def __init__(
        self, model_name: str, max_k: int = 0, cache_config: dict[str, str] | None = None
    ) -> None:
        self.model_name = model_name
        #: labels of ``vllm:cache_config_info`` (vLLM exposes its cache config this way,
        #: ``enable_prefix_caching`` among them, so a client can read what the server runs)
        self.cache_config = dict(cache_config or {})
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted = 0
        self.accepted_per_pos = [0] * max_k
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.preemptions = 0
        self.request_success: dict[str, int] = {}
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        h = Histogram
        self.ttft = h("vllm:time_to_first_token_seconds", "Time to first token.", _TTFT_BUCKETS)
        self.itl = h("vllm:inter_token_latency_seconds", "Inter-token latency.", _ITL_BUCKETS)
        self.tpot = h(
            "vllm:request_time_per_output_token_seconds",
            "Time per output token per request.",
            _ITL_BUCKETS,
        )
        self.e2e = h(
            "vllm:e2e_request_latency_seconds", "End-to-end request latency.", _REQ_BUCKETS
        )
        self.queue = h(
            "vllm:request_queue_time_seconds", "Time in the WAITING phase.", _REQ_BUCKETS
        )
        self.prefill = h(
            "vllm:request_prefill_time_seconds", "Time in the PREFILL phase.", _REQ_BUCKETS
        )
        self.decode = h(
            "vllm:request_decode_time_seconds", "Time in the DECODE phase.", _REQ_BUCKETS
        )
        self.step_lag = h(
            "specload_sim_step_lag_seconds",
            "How late each engine step finished against its simulated end time.",
            _LAG_BUCKETS,
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        # process_start_time_seconds & co., as vLLM's own exporter serves them: a reader
        # tells a restarted server by its start time (metrics/counters.py: restarted)
        ProcessCollector(registry=self.registry)

    def render(self) -> bytes:
        """Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Any]:
        labels, values = ["engine", "model_name"], ["0", self.model_name]

        def counter(name: str, doc: str, v: float) -> CounterMetricFamily:
            fam = CounterMetricFamily(name, doc, labels=labels)
            fam.add_metric(values, v)
            return fam

        def gauge(name: str, doc: str, v: float) -> GaugeMetricFamily:
            fam = GaugeMetricFamily(name, doc, labels=labels)
            fam.add_metric(values, v)
            return fam

        if self.cache_config:
            names = sorted(self.cache_config)
            info = GaugeMetricFamily(
                "vllm:cache_config_info",
                "Information of the LLMEngine CacheConfig",
                labels=[*names, "engine"],
            )
            info.add_metric([*(self.cache_config[k] for k in names), "0"], 1.0)
            yield info
        yield gauge(
            "vllm:num_requests_running", "Requests in model execution batches.", self.running
        )
        yield gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", self.waiting)
        yield gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.kv_usage
        )
        yield counter("vllm:num_preemptions", "Cumulative number of preemptions.", self.preemptions)
        yield counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens
        )
        yield counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            self.generation_tokens,
        )
        yield counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", self.prefix_queries
        )
        yield counter("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", self.prefix_hits)
        if self.accepted_per_pos:  # vLLM has no spec_decode metrics without speculation
            yield counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", self.num_drafts
            )
            yield counter(
                "vllm:spec_decode_num_draft_tokens",
                "Number of draft tokens.",
                self.num_draft_tokens,
            )
            yield counter(
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                self.num_accepted,
            )
            fam = CounterMetricFamily(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                labels=[*labels, "position"],
            )
            for pos, v in enumerate(self.accepted_per_pos):
                fam.add_metric([*values, str(pos)], v)
            yield fam
        fam = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*labels, "finished_reason"],
        )
        for reason, v in sorted(self.request_success.items()):
            fam.add_metric([*values, reason], v)
        yield fam
        for hist in (
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue,
            self.prefill,
            self.decode,
        ):
            yield hist.family(labels, values)
        yield self.step_lag.family([], [])
