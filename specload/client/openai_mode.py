"""``client: openai``: the same request and record, sent with the official ``openai`` SDK.

For users who want the SDK's exact semantics (its request building, its SSE parser, its
pydantic chunk objects). Same ``send`` signature and record as ``StreamClient``; the
SDK costs far more CPU per chunk (see ``benchmarks/results/client_fidelity.md``), so one
process saturates at a much lower token rate and its timestamps drift under load: chunks
are stamped in user space after the SDK has parsed them (no kernel receive stamps here).

One SDK client with one shared HTTP client (connection pool sized by ``concurrency``) and
``max_retries=0``: a retried request would hide a failure and double-count load. Under
Locust, gevent has monkey-patched sockets, so the synchronous SDK is cooperative.
Error mapping: ``APIConnectionError`` → ``connect`` (before any response) or
``stream_broken`` (after chunks arrived), ``APITimeoutError`` / our deadline → ``timeout``,
``APIStatusError`` → ``http``, anything unparseable → ``bad_payload``.
"""

from __future__ import annotations

from typing import Any

from specload.client.assemble import RecordBuilder
from specload.client.attempt import DEFAULTS, AttemptClient, ClientSettings, Exchange, api_root
from specload.client.request import ChatRequest
from specload.client.timing import CLOCK
from specload.core.records import ErrorInfo

__all__ = ["OpenAIStreamClient"]


class _Broken(Exception):
    """The stream ended (or broke) before it was complete."""


class OpenAIStreamClient(AttemptClient):
    """Streams chat completions through ``openai.OpenAI``; safe to share between greenlets."""

    def __init__(self, base_url: str, settings: ClientSettings = DEFAULTS) -> None:
        import httpx2
        import openai

        super().__init__(base_url, settings)
        n = settings.concurrency
        limits = httpx2.Limits(max_connections=n, max_keepalive_connections=n)
        self._sent: dict[str, float] = {}  # request id -> when httpx started sending it
        self._http = openai.DefaultHttpx2Client(
            limits=limits, timeout=self.timeout_s, event_hooks={"request": [self._on_request]}
        )
        self._sdk = openai.OpenAI(
            base_url=api_root(self.base_url),
            api_key=settings.api_key or "EMPTY",
            max_retries=0,
            timeout=self.timeout_s,
            http_client=self._http,
            default_headers=dict(settings.extra_headers or {}) or None,
        )
        self._openai = openai

    def _on_request(self, request: Any) -> None:
        """httpx hook, right before the request goes out: the SDK's own request building
        (pydantic, headers) is client CPU, not server latency, so TTFT starts here."""
        rid = request.headers.get("x-request-id")
        if rid is not None:
            self._sent[rid] = CLOCK.now()

    def close(self) -> None:
        """Close pooled connections."""
        self._sdk.close()

    def _exchange_for(self, req: ChatRequest, request_id: str) -> Exchange:
        kwargs = _sdk_kwargs(req, request_id)

        def settle(b: RecordBuilder) -> None:
            # TTFT starts when httpx sent the request (``_on_request``), not before the SDK
            # built it; a request that never went out keeps the attempt's own start
            b.timing.sent_at = self._sent.pop(request_id, b.timing.sent_at)

        return (lambda b: self._exchange(kwargs, b, req.stream)), settle

    def _exchange(self, kwargs: dict[str, Any], b: RecordBuilder, stream: bool) -> None:
        create = self._sdk.chat.completions.create
        if not stream:
            resp = create(**kwargs)
            b.status = 200
            b.done_at = t = CLOCK.now()
            b.on_chunk(resp.model_dump(exclude_none=True), t)
            return
        with create(**kwargs) as chunks:
            b.status = chunks.response.status_code
            for chunk in chunks:
                t = CLOCK.now()
                _on_sdk_chunk(b, chunk, t)
        if b.finish_reason is None:
            raise _Broken("stream ended before finish_reason")
        b.saw_done = True
        b.done_at = b.timing.last_content_at or CLOCK.now()

    def _classify(self, exc: Exception, b: RecordBuilder) -> ErrorInfo:
        o = self._openai
        detail = f"{exc.__class__.__name__}: {str(exc)[:160]}"
        if isinstance(exc, o.APITimeoutError):
            return ErrorInfo("timeout", detail)
        if isinstance(exc, o.APIStatusError):
            b.status = exc.status_code
            return ErrorInfo("http", f"HTTP {exc.status_code}: {str(exc)[:160]}")
        if isinstance(exc, o.APIConnectionError):
            kind = "stream_broken" if (b.status is not None) else "connect"
            return ErrorInfo(kind, detail)
        import httpx2

        if isinstance(exc, _Broken) or (
            b.status is not None and isinstance(exc, (OSError, httpx2.TransportError))
        ):
            return ErrorInfo("stream_broken", detail)
        return ErrorInfo("bad_payload", detail)


def _sdk_kwargs(req: ChatRequest, request_id: str) -> dict[str, Any]:
    """The SDK call: standard fields as arguments, vLLM extensions in ``extra_body``."""
    body = req.body()
    std = {
        "model",
        "messages",
        "temperature",
        "stream",
        "stream_options",
        "max_tokens",
        "seed",
        "stop",
        "tools",
    }
    kwargs: dict[str, Any] = {k: v for k, v in body.items() if k in std}
    extra = {k: v for k, v in body.items() if k not in std}
    if extra:
        kwargs["extra_body"] = extra
    kwargs["extra_headers"] = {"X-Request-Id": request_id}
    return kwargs


def _on_sdk_chunk(b: RecordBuilder, chunk: Any, t: float) -> None:
    """Attribute access on the SDK's pydantic chunk (cheaper than ``model_dump``)."""
    if chunk.choices:
        choice = chunk.choices[0]
        delta = choice.delta
        got = False
        if delta is not None:
            if delta.content:
                b.add_text(delta.content)
                got = True
            extra = getattr(delta, "model_extra", None) or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if reasoning:
                b.add_text(reasoning, kind="reasoning")
                got = True
            if delta.tool_calls:
                for i, call in enumerate(delta.tool_calls):
                    b.tool_call(call.index if call.index is not None else i)
                    fn = call.function
                    b.add_text(((fn.name or "") + (fn.arguments or "")) if fn else "", kind="tool")
                got = True
        if got:
            b.timing.content(t)
        if choice.finish_reason:
            b.finish_reason = choice.finish_reason
    if chunk.usage is not None:
        b.usage(chunk.usage.model_dump())
