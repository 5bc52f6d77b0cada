"""/metrics scraping: literal exposition text in, flat sorted-label keys out."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from specload.metrics.scrape import (
    MetricsScraper,
    fetch_server_info,
    metric_key,
    parse_metrics,
    split_key,
)

PROM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0",engine="0"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="1",engine="0"} 25.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{model_name="m",position="0",engine="0"} 1.7e9
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5.0
vllm:time_to_first_token_seconds_count{model_name="m"} 5.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.2
"""


def test_samples_flatten_to_keys_with_labels_sorted_and_created_dropped() -> None:
    values = parse_metrics(PROM)
    assert values['vllm:num_requests_running{engine="0",model_name="m"}'] == 3.0
    assert (
        values[
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"}'
        ]
        == 25.0
    )
    assert values['vllm:time_to_first_token_seconds_bucket{le="0.01",model_name="m"}'] == 2.0
    assert not [k for k in values if "_created" in k]
    assert len(values) == 7


def test_key_round_trips_including_quotes() -> None:
    key = metric_key("x_total", {"b": 'say "hi"', "a": "1"})
    assert key == 'x_total{a="1",b="say \\"hi\\""}'
    assert split_key(key) == ("x_total", {"a": "1", "b": 'say "hi"'})
    assert split_key("plain") == ("plain", {})


def test_text_that_is_not_prometheus_raises_value_error() -> None:
    with pytest.raises(ValueError):
        parse_metrics("this is { not prometheus\n")


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[int, bytes]]] = {}

    def do_GET(self) -> None:
        code, body = self.routes.get(self.path, (404, b"not found"))
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"routes": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def test_scraper_reads_a_real_metrics_endpoint(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/metrics"] = (200, PROM.encode())
    scraper = MetricsScraper(url)
    t, values = scraper.timed_scrape()
    assert (
        values is not None and values['vllm:num_requests_running{engine="0",model_name="m"}'] == 3.0
    )
    assert t > 0 and scraper.scrapes == 1


def test_server_without_metrics_or_version_is_fine(server: tuple[str, type[_Handler]]) -> None:
    url, _ = server
    scraper = MetricsScraper(url)
    assert scraper.scrape() is None and "unavailable" in (scraper.last_error or "")
    assert fetch_server_info(url) == {"server_version": None, "models": None}


def test_server_info_reads_version_and_model_ids(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.routes["/version"] = (200, b'{"version": "0.26.0"}')
    handler.routes["/v1/models"] = (
        200,
        b'{"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}',
    )
    assert fetch_server_info(url) == {"server_version": "0.26.0", "models": ["m1", "m2"]}


def test_unreachable_server_gives_none() -> None:
    assert MetricsScraper("http://127.0.0.1:9", timeout_s=0.5).scrape() is None
