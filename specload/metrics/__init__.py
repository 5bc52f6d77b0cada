"""What is measured beside the records: the server's ``/metrics``, GPU and host telemetry.

Scraping ``/metrics`` and turning vLLM's names into per-step figures, GPU and host
telemetry while a run goes, and the host fingerprint in run.json (``host``).
"""

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
