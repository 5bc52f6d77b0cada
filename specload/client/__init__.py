"""One streaming chat completion → one ``RequestRecord``.

- ``sse.SSEDecoder``: pure incremental SSE decoder (``feed(bytes)`` / ``flush()``).
- ``stream.StreamClient``: the default client (geventhttpclient, ``readline``, orjson).
- ``openai_mode.OpenAIStreamClient``: the same ``send`` through the official SDK.
- ``request.ChatRequest``: what is sent; ``timing``: TTFT/TPOT/E2E/ITL; ``contract``: JSON
  validity, required fields, tool calls, hashes; ``rxstamp``: kernel receive timestamps;
  ``assemble.RecordBuilder``: pieces of a response → one ``RequestRecord``.

``make_client(kind, base_url, ClientSettings(...))`` picks the implementation by the
scenario's ``client``; ``ClientSettings`` is what both take besides the URL.
Importing this package imports gevent but does not monkey-patch anything.
"""

from __future__ import annotations

from typing import Any

from specload.client.attempt import DEFAULTS, ClientSettings
from specload.client.request import ChatRequest, RecordMeta
from specload.client.stream import RequestCancelled, StreamClient

__all__ = [
    "ChatRequest",
    "ClientSettings",
    "RecordMeta",
    "RequestCancelled",
    "StreamClient",
    "make_client",
]


def make_client(kind: str, base_url: str, settings: ClientSettings = DEFAULTS) -> Any:
    """``StreamClient`` for ``kind == "fast"``, ``OpenAIStreamClient`` for ``"openai"``."""
    if kind == "fast":
        return StreamClient(base_url, settings)
    if kind == "openai":
        from specload.client.openai_mode import OpenAIStreamClient

        return OpenAIStreamClient(base_url, settings)
    raise ValueError(f"client kind {kind!r} not in ('fast', 'openai')")
