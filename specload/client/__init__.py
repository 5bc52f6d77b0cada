"""One streaming chat completion → one ``RequestRecord``.

- ``sse.SSEDecoder``: pure incremental SSE decoder (``feed(bytes)`` / ``flush()``).
- ``stream.StreamClient``: the default client (geventhttpclient, ``readline``, orjson).
- ``openai_mode.OpenAIStreamClient``: the same ``send`` through the official SDK.
- ``request.ChatRequest``: what is sent; ``timing``: TTFT/TPOT/E2E/ITL; ``contract``: JSON
  validity, required fields, tool calls, hashes; ``rxstamp``: kernel receive timestamps;
  ``assemble.RecordBuilder``: pieces of a response → one ``RequestRecord``.

``make_client(kind, base_url, ...)`` picks the implementation by the scenario's ``client``.
Importing this package imports gevent but does not monkey-patch anything.
"""

from __future__ import annotations

from typing import Any

from specload.client.request import ChatRequest, RecordMeta
from specload.client.stream import RequestCancelled, StreamClient

__all__ = ["ChatRequest", "RecordMeta", "RequestCancelled", "StreamClient", "make_client"]


def make_client(kind: str, base_url: str, **kwargs: Any) -> Any:
    """``StreamClient`` for ``kind == "fast"``, ``OpenAIStreamClient`` for ``"openai"``.

    ``kwargs`` are the shared constructor keywords (``api_key``, ``timeout_s``,
    ``store_text``, ``concurrency``, ``extra_headers``, ``record_itl``).
    """
    if kind == "fast":
        return StreamClient(base_url, **kwargs)
    if kind == "openai":
        from specload.client.openai_mode import OpenAIStreamClient

        return OpenAIStreamClient(base_url, **kwargs)
    raise ValueError(f"client kind {kind!r} not in ('fast', 'openai')")
