"""Pre-flight: prove the target can serve one streamed chat completion before any load.

Without it a typo in ``--host``, a server still loading, or the wrong model name ran a whole
scenario of errors and ended "completed" (exit 0). ``preflight(host, model=..., api_key=...)``
checks, in this order and within ``BUDGET_S`` seconds in all:

1. the host carries no ``/v1`` path (specload adds ``/v1/chat/completions`` itself);
2. the server answers at all (connection refused or a timeout names the URL and the OS error);
3. ``GET /v1/models`` lists the scenario's model (skipped when the server has no such endpoint;
   with no model in the scenario the first one listed is used, as the run itself does);
4. one streamed chat completion (``stream_options.include_usage``, ``max_tokens`` 4) answers
   HTTP 200 with at least one content or finish chunk and a ``usage`` object.

Any failure is a ``PreflightError``: one line, exit code 2. Blocking ``urllib`` on purpose: it
works in the plain CLI process and, cooperatively, under Locust's gevent monkey-patching. The
API key is sent as a bearer token and never appears in a message. The preflight request
carries ``X-Request-Id: specload-preflight-<hex>`` so a server log (or a test holding records
against the server's own list) can tell it from the run's requests.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from specload.core.errors import ConfigError, TargetError

__all__ = [
    "BUDGET_S",
    "PREFLIGHT_ID_PREFIX",
    "PreflightError",
    "PreflightResult",
    "check_host_path",
    "preflight",
]

#: Seconds the whole pre-flight may take (a refused port fails at once).
BUDGET_S = 10.0
#: ``X-Request-Id`` prefix of the pre-flight request.
PREFLIGHT_ID_PREFIX = "specload-preflight-"
#: Characters of an error body quoted in a message.
BODY_CHARS = 200
#: The pre-flight prompt: a few tokens, below one prefix-cache block (16 tokens in vLLM), so
#: it leaves nothing in a prefix cache that the run's prompts could hit.
PROMPT = "Say OK."
HINT = "--skip-preflight runs anyway"


#: No proxies from the environment: the load client connects directly, so must the check.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PreflightError(TargetError):
    """The target failed a pre-flight check: nothing was run. Exit code 2."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class PreflightResult:
    """What the pre-flight learned: the model the run will use and what the server lists."""

    url: str
    model: str | None
    models: list[str] | None
    usage: dict[str, Any]


def check_host_path(host: str) -> None:
    """A ``/v1`` path in the host would make every request go to ``/v1/v1/chat/completions``."""
    path = urlsplit(host).path.rstrip("/")
    if path == "/v1" or path.endswith("/v1"):
        base = host.rstrip("/")[: -len("/v1")]
        raise ConfigError(
            f"{host!r} ends in /v1: drop /v1 (use {base}), specload adds /v1/chat/completions "
            "itself",
            path="--host",
        )


def preflight(
    host: str, *, model: str | None, api_key: str | None, budget_s: float = BUDGET_S
) -> PreflightResult:
    """Run the checks of the module doc; ``PreflightError``/``ConfigError`` on the first failure."""
    check_host_path(host)
    base = host.rstrip("/")
    clock = _Clock(time.monotonic() + budget_s, budget_s)
    models = _served_models(base, api_key, clock)
    chosen = _choose_model(base, model, models)
    usage = _stream_once(base, chosen, api_key, clock)
    return PreflightResult(url=base, model=chosen, models=models, usage=usage)


# --- HTTP ------------------------------------------------------------------------------
def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


@dataclass(frozen=True, slots=True)
class _Clock:
    """The whole pre-flight's deadline (``time.monotonic``) and its length, for messages."""

    deadline: float
    budget_s: float

    def left(self, url: str) -> float:
        """Seconds left for the next step; ``PreflightError`` once the budget is spent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PreflightError(
                f"pre-flight: no complete answer from {url} within {self.budget_s:g} s ({HINT})"
            )
        return left


def _open(req: urllib.request.Request, clock: _Clock) -> Any:
    """``urlopen`` within the budget; unreachable → one line naming the URL and the OS error."""
    url = req.full_url
    try:
        return _OPENER.open(req, timeout=clock.left(url))
    except urllib.error.HTTPError:
        raise
    except urllib.error.URLError as exc:
        raise PreflightError(
            f"pre-flight: cannot reach {url}: {_reason(exc.reason, clock)} "
            f"(is the server up? {HINT})"
        ) from None
    except (OSError, ValueError) as exc:
        raise PreflightError(f"pre-flight: {url}: {_reason(exc, clock)} ({HINT})") from None


def _reason(reason: object, clock: _Clock) -> str:
    if isinstance(reason, TimeoutError):
        return f"no answer within {clock.budget_s:g} s"
    return os_reason(reason)


def os_reason(reason: object) -> str:
    """An OS error as the pre-flight words it: "Connection refused (errno 111)" (a
    ``URLError`` is unwrapped to its reason)."""
    if isinstance(reason, urllib.error.URLError) and not isinstance(reason, urllib.error.HTTPError):
        reason = reason.reason
    if isinstance(reason, OSError) and reason.strerror:
        return f"{reason.strerror} (errno {reason.errno})" if reason.errno else reason.strerror
    return str(reason)


def _http_error(url: str, exc: urllib.error.HTTPError) -> PreflightError:
    try:
        body = exc.read(4096).decode("utf-8", errors="replace")
    except OSError:
        body = ""
    body = " ".join(body.split())[:BODY_CHARS]
    return PreflightError(
        f"pre-flight: {url} answered HTTP {exc.code}" + (f": {body}" if body else "") + f" ({HINT})"
    )


# --- checks ----------------------------------------------------------------------------
def _served_models(base: str, api_key: str | None, clock: _Clock) -> list[str] | None:
    """Model ids from ``/v1/models``; None when the server has no such endpoint."""
    url = base + "/v1/models"
    req = urllib.request.Request(url, headers=_headers(api_key))
    try:
        with _open(req, clock) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            return None
        raise _http_error(url, exc) from None
    except (TimeoutError, OSError) as exc:
        raise PreflightError(f"pre-flight: {url}: {_reason(exc, clock)} ({HINT})") from None
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def _choose_model(base: str, model: str | None, models: list[str] | None) -> str | None:
    if model is None:
        return models[0] if models else None
    if models is not None and model not in models:
        served = ", ".join(models) if models else "none"
        raise PreflightError(
            f"pre-flight: model {model!r} is not served by {base} "
            f"(it serves: {served}); fix the scenario's model ({HINT})"
        )
    return model


def _chat_body(model: str | None) -> bytes:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model is not None:
        body["model"] = model
    return json.dumps(body).encode()


def _stream_once(
    base: str, model: str | None, api_key: str | None, clock: _Clock
) -> dict[str, Any]:
    """One streamed completion; its ``usage``. Checks status, chunks and usage."""
    url = base + "/v1/chat/completions"
    headers = {
        **_headers(api_key),
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "X-Request-Id": PREFLIGHT_ID_PREFIX + secrets.token_hex(4),
    }
    req = urllib.request.Request(url, data=_chat_body(model), headers=headers, method="POST")
    try:
        with _open(req, clock) as resp:
            seen = _read_stream(resp, url, clock)
    except urllib.error.HTTPError as exc:
        raise _http_error(url, exc) from None
    except (TimeoutError, OSError) as exc:
        raise PreflightError(
            f"pre-flight: {url}: stream broke ({_reason(exc, clock)}) ({HINT})"
        ) from None
    return _judge(url, seen)


@dataclass
class _Seen:
    chunks: int = 0
    content_or_finish: int = 0
    usage: dict[str, Any] | None = None
    bad: str | None = None


def _read_stream(resp: Any, url: str, clock: _Clock) -> _Seen:
    from specload.client.sse import SSEDecoder  # here: the client package imports gevent

    decoder, seen = SSEDecoder(), _Seen()
    while True:
        _read_timeout(resp, clock.left(url))
        data = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        events = decoder.feed(data) if data else decoder.flush()
        for ev in events:
            if ev.is_done:
                return seen
            _take(seen, ev.data)
        if not data:
            return seen


def _read_timeout(resp: Any, seconds: float) -> None:
    """Bound the next read by what is left of the budget (best effort: ``urlopen``'s own
    timeout was fixed when the request was sent)."""
    raw = getattr(getattr(resp, "fp", None), "raw", None)
    sock = getattr(raw, "_sock", None)
    if isinstance(sock, socket.socket):
        sock.settimeout(seconds)


def _take(seen: _Seen, data: str) -> None:
    try:
        obj = json.loads(data)
    except ValueError:
        seen.bad = seen.bad or data[:BODY_CHARS]
        return
    if not isinstance(obj, dict):
        return
    seen.chunks += 1
    if isinstance(obj.get("usage"), dict):
        seen.usage = obj["usage"]
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if (isinstance(delta, dict) and delta.get("content")) or (
            isinstance(choice, dict) and choice.get("finish_reason")
        ):
            seen.content_or_finish += 1


def _judge(url: str, seen: _Seen) -> dict[str, Any]:
    if seen.bad is not None:
        raise PreflightError(
            f"pre-flight: {url} streamed a line that is not JSON: {seen.bad!r} ({HINT})"
        )
    if not seen.content_or_finish:
        raise PreflightError(
            f"pre-flight: {url} streamed {seen.chunks} chunk(s) but no content "
            f"and no finish_reason ({HINT})"
        )
    if seen.usage is None:
        raise PreflightError(
            f"pre-flight: {url} streamed no usage object (stream_options "
            "include_usage ignored? token counts need it) "
            f"({HINT})"
        )
    return seen.usage
