"""Turns the pieces of one streamed response into exactly one ``RequestRecord``.

Both clients (``stream.py`` with geventhttpclient, ``openai_mode.py`` with the SDK) feed a
``RecordBuilder``: ``content(t, text)`` for every chunk that carries content — assistant
text, ``reasoning_content`` / ``reasoning``, or a tool-call delta (a role-only chunk does
not count), ``finish(...)`` / ``usage(...)`` as they arrive, and ``build(error)`` once.
``on_chunk(obj, t)`` does the dispatch for an OpenAI chunk already parsed into a dict.

Text is only kept in the record with ``store_text``; otherwise it is reduced to SHA-256 and
length (the prompt's too). The contract (JSON validity, required fields, tool calls) is
checked here so the analysis never needs the text.
"""

from __future__ import annotations

from typing import Any

from specload.client.contract import check_output, messages_sha256, sha256_text
from specload.client.lookup import LookupMatcher, prompt_text
from specload.client.request import ChatRequest, RecordMeta
from specload.client.timing import SAME_CLOCK, StreamTiming, WallAnchor, itl_s
from specload.core.records import ANSWER_KEY, ErrorInfo, RequestRecord

__all__ = ["RecordBuilder"]


class RecordBuilder:
    """Accumulates one response; ``build`` makes its record (call it exactly once)."""

    __slots__ = (
        "_content",
        "_extra_text",
        "_lookup",
        "_tool_ids",
        "cached_tokens",
        "done_at",
        "finish_reason",
        "meta",
        "output_tokens",
        "prompt_tokens",
        "record_itl",
        "req",
        "saw_done",
        "status",
        "store_text",
        "timing",
    )

    def __init__(
        self,
        req: ChatRequest,
        meta: RecordMeta,
        sent_at: float,
        *,
        anchor: WallAnchor = SAME_CLOCK,
        store_text: bool = False,
        record_itl: bool = True,
    ) -> None:
        self.req = req
        self.meta = meta
        self.timing = StreamTiming(sent_at=sent_at, anchor=anchor)
        self.store_text = store_text
        self.record_itl = record_itl
        self._content: list[str] = []  # assistant text (the contract is checked on it)
        self._extra_text: list[str] = []  # reasoning + tool-call text, part of the output hash
        self._tool_ids: set[int] = set()
        self._lookup: LookupMatcher | None = None  # built at the first text, after sending
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.status: int | None = None
        self.saw_done = False
        self.done_at: float | None = None

    def on_chunk(self, obj: Any, t: float) -> None:
        """Dispatch one parsed ``chat.completion.chunk`` (dict) received at ``t``."""
        if not isinstance(obj, dict):
            raise ValueError("chunk is not a JSON object")  # noqa: TRY004 - callers catch ValueError
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta") or choice.get("message") or {}
            got = False
            text = delta.get("content")
            if text:
                self._content.append(text)
                self._lookup_feed(text)
                got = True
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                self._extra_text.append(reasoning)
                self._lookup_feed(reasoning)
                got = True
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls)
                got = True
            if got:
                self.timing.content(t)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        usage = obj.get("usage")
        if usage:
            self.usage(usage)
        if "error" in obj and not choices:
            err = obj["error"]
            msg = err.get("message", "") if isinstance(err, dict) else str(err)
            raise ValueError(f"error event in stream: {msg[:160]}")

    def _tool_calls(self, calls: list[dict[str, Any]]) -> None:
        for i, call in enumerate(calls):
            self._tool_ids.add(int(call.get("index", i)))
            fn = call.get("function") or {}
            self._extra_text.append((fn.get("name") or "") + (fn.get("arguments") or ""))

    def content(self, t: float, text: str = "", *, kind: str = "content") -> None:
        """A content-bearing chunk (``kind``: content | reasoning | tool) arrived at ``t``."""
        self.add_text(text, kind=kind)
        self.timing.content(t)

    def add_text(self, text: str, *, kind: str = "content") -> None:
        """Text of a chunk whose arrival is stamped separately (``timing.content``)."""
        (self._content if kind == "content" else self._extra_text).append(text)
        if kind != "tool":
            self._lookup_feed(text)

    def _lookup_feed(self, text: str) -> None:
        """Would prompt lookup have proposed this output? (``client/lookup.py``; no text kept)"""
        if self._lookup is None:
            self._lookup = LookupMatcher(prompt_text(self.req.messages))
        self._lookup.feed(text)

    def tool_call(self, index: int) -> None:
        """Count a tool call by its stream index (deltas of one call share it)."""
        self._tool_ids.add(index)

    def usage(self, usage: dict[str, Any]) -> None:
        """Token counts from the server's ``usage`` object (the authoritative count)."""
        if usage.get("completion_tokens") is not None:
            self.output_tokens = int(usage["completion_tokens"])
        if usage.get("prompt_tokens") is not None:
            self.prompt_tokens = int(usage["prompt_tokens"])
        details = usage.get("prompt_tokens_details") or {}
        if details.get("cached_tokens") is not None:
            self.cached_tokens = int(details["cached_tokens"])

    def build(self, error: ErrorInfo | None, done_at: float) -> RequestRecord:
        """The one record of this request; ``ok`` iff no error and the status was 200.

        Durations are differences of the builder's (monotonic) times; timestamps are those
        times mapped to unix seconds through the request's anchor (``client/timing.py``).
        """
        tm = self.timing
        wall = tm.anchor.to_wall
        first = tm.first_content_at
        sent_at = wall(tm.sent_at)
        if self.output_tokens is not None:
            out_tokens: int | None = self.output_tokens
            source: str | None = "usage"
        elif tm.content_chunks:
            out_tokens, source = tm.content_chunks, "chunks"
        else:
            out_tokens, source = (0, "chunks") if error is None else (None, None)
        ttft, tpot, e2e = tm.summary(out_tokens)
        content = "".join(self._content)
        output = content + "".join(self._extra_text)
        prompt_sha, prompt_chars = messages_sha256(self.req.messages)
        contract = check_output(
            content, want_json=self.req.expect_json, required_fields=self.req.required_fields
        )
        extra: dict[str, Any] = {}
        if self.req.keep_answer and error is None:
            extra[ANSWER_KEY] = content  # for the next turn's history; never written
        if contract.missing_fields:
            extra["missing_fields"] = list(contract.missing_fields)
        m = self.meta
        return RequestRecord(
            request_id=m.request_id,
            worker=m.worker,
            step=m.step,
            target_qps=m.target_qps,
            warmup=m.warmup,
            scheduled_at=m.scheduled_at,
            sent_at=sent_at,
            first_token_at=None if first is None else wall(first),
            done_at=wall(done_at),
            queue_delay_s=sent_at - m.scheduled_at,
            ttft_s=ttft,
            tpot_s=tpot,
            e2e_s=e2e,
            itl_s=itl_s(tm.chunk_times) if self.record_itl else None,
            content_chunks=tm.content_chunks,
            prompt_tokens=self.prompt_tokens,
            output_tokens=out_tokens,
            cached_tokens=self.cached_tokens,
            tokens_source=source,
            finish_reason=self.finish_reason,
            status=self.status,
            ok=error is None and self.status == 200,
            error=error,
            prompt_sha256=prompt_sha,
            prompt_chars=prompt_chars,
            output_sha256=sha256_text(output) if (output or error is None) else None,
            output_chars=len(output),
            json_valid=contract.json_valid,
            tool_calls=len(self._tool_ids),
            repeat=m.repeat,
            prompt_index=self.req.prompt_index,
            category=self.req.category,
            prompt_text=_prompt_text(self.req) if self.store_text else None,
            output_text=output if self.store_text else None,
            extra=extra,
            lookup_match_rate=self._lookup.finish().match_rate if self._lookup else None,
        )


def _prompt_text(req: ChatRequest) -> str:
    """The prompt as one string for ``--store-text`` (contents joined by role)."""
    return "\n".join(f"{m.get('role', '')}: {m.get('content') or ''}" for m in req.messages)
