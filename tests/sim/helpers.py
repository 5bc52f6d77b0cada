"""Small HTTP helpers for simulator tests (stdlib only, no client code from specload)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families

MODEL = "specload-sim"


def post(url: str, body: Any, headers: dict | None = None) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def chat(url: str, content: str, max_tokens: int = 8, **extra: Any) -> dict:
    status, body = post(
        url + "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            **extra,
        },
    )
    assert status == 200, body
    return json.loads(body)


def stream_raw(url: str, body: dict, headers: dict | None = None) -> tuple[bytes, Exception | None]:
    """POST a streaming request; return the body bytes read and the error that ended it."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    got = b""
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            json.dumps(body),
            {"Content-Type": "application/json", **(headers or {})},
        )
        resp = conn.getresponse()
        while True:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
            if not chunk:
                return got, None
            got += chunk
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return got, exc
    finally:
        conn.close()


def metrics(url: str) -> dict[str, float]:
    """``name{labels}`` → value, summed over ``engine``/``model_name`` labels."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if k not in ("engine", "model_name")}
            key = s.name + (
                "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                if labels
                else ""
            )
            out[key] = out.get(key, 0.0) + s.value
    return out
