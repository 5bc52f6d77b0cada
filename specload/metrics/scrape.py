"""Reading the server's own view: ``/metrics`` (Prometheus text), ``/version``, ``/v1/models``.

The client measures what the user perceives; the server's counters say *why* (acceptance of
drafted tokens, prefix-cache hits, KV usage, queue length). Scrapes are flattened to
``name{label="v",...}`` keys with labels sorted, so one scrape is one flat JSON object in
``metrics.jsonl`` and a delta is a key-wise subtraction. A server without these endpoints is
normal (not every OpenAI-compatible server is vLLM): every function here returns ``None`` or
empty values for it instead of raising. Blocking ``urllib`` on purpose: under Locust, gevent
has patched sockets, so it yields; elsewhere it is plain and dependency-free.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = [
    "MetricsScraper",
    "fetch_server_info",
    "metric_key",
    "parse_metrics",
    "split_key",
]

_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metric_key(name: str, labels: dict[str, str]) -> str:
    """``name{a="1",b="2"}`` with labels sorted by name; the bare name when there are none."""
    if not labels:
        return name
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(labels.items())
    )
    return f"{name}{{{inner}}}"


def split_key(key: str) -> tuple[str, dict[str, str]]:
    """Inverse of ``metric_key``: the sample name and its labels."""
    brace = key.find("{")
    if brace < 0:
        return key, {}
    labels = {
        k: v.replace('\\"', '"').replace("\\\\", "\\")
        for k, v in _LABEL_RE.findall(key[brace + 1 : -1])
    }
    return key[:brace], labels


def parse_metrics(text: str) -> dict[str, float]:
    """Flatten Prometheus exposition text into ``{key: value}``.

    ``*_created`` samples (creation timestamps) are dropped: they are not measurements and
    would turn up as huge bogus deltas. Non-finite values are dropped too (JSON has no NaN).
    Raises ``ValueError`` when the text is not Prometheus exposition format.
    """
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            value = float(sample.value)
            if not math.isfinite(value):
                continue
            values[metric_key(sample.name, dict(sample.labels))] = value
    return values


def _fetch(url: str, api_key: str | None, timeout_s: float) -> tuple[bytes | None, str]:
    """GET ``url``: ``(body, "")``, or ``(None, why)`` for any network or HTTP failure."""
    req = urllib.request.Request(url)
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return bytes(resp.read()), ""
    except urllib.error.HTTPError as exc:
        return None, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            return None, f"no answer within {timeout_s:g} s"
        return None, str(reason) or type(reason).__name__


def _get(url: str, api_key: str | None, timeout_s: float) -> bytes | None:
    """GET ``url``; ``None`` for any network or HTTP failure (the endpoint is optional)."""
    return _fetch(url, api_key, timeout_s)[0]


class MetricsScraper:
    """Scrapes ``{base_url}/metrics``; remembers whether the server has the endpoint at all.

    ``scrape()`` returns ``None`` when the endpoint is absent, failing, too slow (past
    ``timeout_s``) or unreadable; ``last_error`` says why (for run.json's notes and the step's
    ``server_notes`` in steps.json).
    """

    def __init__(
        self, base_url: str, *, api_key: str | None = None, timeout_s: float = 3.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self.last_error: str | None = None
        self.scrapes = 0

    def scrape(self) -> dict[str, float] | None:
        """One scrape, flattened; ``None`` when the server has no usable ``/metrics``."""
        body, why = _fetch(self.url, self._api_key, self._timeout_s)
        if body is None:
            self.last_error = f"{self.url} unavailable ({why})"
            return None
        try:
            values = parse_metrics(body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            self.last_error = f"{self.url} is not Prometheus text ({exc})"
            return None
        self.scrapes += 1
        return values

    def timed_scrape(self) -> tuple[float, dict[str, float] | None]:
        """``(t, values)`` with ``t`` the unix time halfway through the request."""
        t0 = time.time()
        values = self.scrape()
        return (t0 + time.time()) / 2, values


def _json(body: bytes | None) -> Any:
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def fetch_server_info(
    base_url: str, *, api_key: str | None = None, timeout_s: float = 3.0
) -> dict[str, Any]:
    """``{"server_version": str|None, "models": [ids]|None}`` from ``/version`` and ``/v1/models``."""
    base = base_url.rstrip("/")
    version = _json(_get(base + "/version", api_key, timeout_s))
    models = _json(_get(base + "/v1/models", api_key, timeout_s))
    server_version = version.get("version") if isinstance(version, dict) else None
    ids = None
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        ids = [m.get("id") for m in models["data"] if isinstance(m, dict) and m.get("id")]
    return {"server_version": server_version, "models": ids}
