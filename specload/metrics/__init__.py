"""The server's own metrics: scraping ``/metrics`` and turning vLLM's names into per-step figures."""

from specload.metrics.scrape import (
    MetricsScraper,
    fetch_server_info,
    metric_key,
    parse_metrics,
    split_key,
)
from specload.metrics.vllm import StepServerMetrics, per_step_server_metrics, step_server_metrics

__all__ = [
    "MetricsScraper",
    "StepServerMetrics",
    "fetch_server_info",
    "metric_key",
    "parse_metrics",
    "per_step_server_metrics",
    "split_key",
    "step_server_metrics",
]
