"""What one chat completion asks for (``ChatRequest``) and where its record belongs.

``ChatRequest`` is built by the Locust user from the scenario and a prompt; both clients
(fast and ``openai`` mode) send the same body: ``stream_options.include_usage`` always, the
vLLM extensions ``min_tokens`` / ``ignore_eos`` only when set, ``extra`` merged last (a
scenario's ``extra_body``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatRequest", "RecordMeta"]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One ``/v1/chat/completions`` request. ``prompt_index`` only labels the record."""

    model: str
    messages: Sequence[dict[str, Any]]
    max_tokens: int | None = None
    min_tokens: int | None = None
    ignore_eos: bool = False
    temperature: float = 0.0
    seed: int | None = None
    stop: Sequence[str] | None = None
    stream: bool = True
    tools: Sequence[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    prompt_index: int | None = None
    #: the prompt's class from a prompt file (labels the record, never sent)
    category: str | None = None
    #: a conversation turn with another to follow: the client hands back the answer's text
    keep_answer: bool = False
    expect_json: bool = False
    required_fields: tuple[str, ...] = ()

    def body(self) -> dict[str, Any]:
        """The JSON request body (vLLM extensions included only when set)."""
        b: dict[str, Any] = {
            "model": self.model,
            "messages": list(self.messages),
            "temperature": self.temperature,
            "stream": self.stream,
        }
        if self.stream:
            b["stream_options"] = {"include_usage": True}
        if self.max_tokens is not None:
            b["max_tokens"] = self.max_tokens
        if self.min_tokens is not None:
            b["min_tokens"] = self.min_tokens
        if self.ignore_eos:
            b["ignore_eos"] = True
        if self.seed is not None:
            b["seed"] = self.seed
        if self.stop:
            b["stop"] = list(self.stop)
        if self.tools:
            b["tools"] = list(self.tools)
        b.update(self.extra)
        return b


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """The load-side facts of a request the client copies into its record unchanged."""

    request_id: str
    worker: str
    step: int
    repeat: int
    target_qps: float
    warmup: bool
    scheduled_at: float
