"""The record schema: one ``RequestRecord`` per request sent, success or failure.

This module owns the contract between the client, the recorder and the analysis (see
``docs/run-dir.md``, "Run directory"). Fields are only ever added, never
renamed; ``SCHEMA_VERSION`` is written with every record so readers can refuse what they do
not understand. Times are unix seconds (floats); durations end in ``_s``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "ANSWER_KEY",
    "BEHIND_SHARE",
    "LATE_S",
    "ERROR_KINDS",
    "SCHEMA_VERSION",
    "ErrorInfo",
    "RequestRecord",
    "behind_words",
    "counts_as_load",
    "fell_behind",
]

SCHEMA_VERSION = 1

#: The only values ``ErrorInfo.kind`` may take.
ERROR_KINDS = ("connect", "timeout", "http", "stream_broken", "bad_payload", "cancelled")


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why a request failed: a kind from ``ERROR_KINDS`` and a short detail (never user text)."""

    kind: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"error kind {self.kind!r} not in {ERROR_KINDS}")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Everything measured about one request. Exactly one per request sent.

    TTFT, TPOT and E2E follow vLLM's benchmark definitions: TTFT to the first *content*
    token (the role-only chunk does not count), E2E to the last content token (the usage
    chunk does not extend it), TPOT = (E2E - TTFT) / (output_tokens - 1) when > 1 token.
    """

    request_id: str
    worker: str
    step: int
    target_qps: float
    warmup: bool
    scheduled_at: float
    sent_at: float
    first_token_at: float | None = None
    done_at: float | None = None
    queue_delay_s: float = 0.0
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] | None = None
    content_chunks: int = 0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    tokens_source: str | None = None  # "usage" | "chunks"
    finish_reason: str | None = None
    status: int | None = None  # HTTP status
    ok: bool = False
    error: ErrorInfo | None = None
    prompt_sha256: str | None = None
    prompt_chars: int | None = None
    output_sha256: str | None = None
    output_chars: int | None = None
    json_valid: bool | None = None
    tool_calls: int | None = None
    repeat: int = 0
    prompt_index: int | None = None
    #: the prompt's class (a prompt file's ``category``): compare answers per class too
    category: str | None = None
    #: multi-turn conversations (``scenario/conversation.py``): which one, and which turn
    conversation_id: str | None = None
    turn: int | None = None
    #: a closed-loop step's requests in flight (``{concurrency: N}`` steps; target_qps 0)
    concurrency: int | None = None
    #: an interleaved sweep's block (``sweep --interleave``): the block's number in the
    #: session's run order, shared by every record the block sent; None outside such a sweep
    block: int | None = None
    #: an interleaved session's condition (the label of the server the block sent to)
    condition: str | None = None
    #: sent after its interleaved block's measured window, while the load went on until the
    #: block's measured requests had finished (``warmup`` is then true too: not measured)
    cooldown: bool | None = None
    lookup_match_rate: float | None = None
    prompt_text: str | None = None  # only with --store-text
    output_text: str | None = None  # only with --store-text
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; text fields are dropped when they were not stored.

        Built field by field, not with ``asdict`` (same result): asdict's recursive deep copy
        was ~3 % of a load process's CPU at 128 req/s (one record per request). Only the
        mutable values are copied: the ITL list, the error, ``extra``.
        """
        d = {name: getattr(self, name) for name in _RECORD_FIELDS}
        if self.itl_s is not None:
            d["itl_s"] = list(self.itl_s)
        if self.error is not None:
            d["error"] = {"kind": self.error.kind, "detail": self.error.detail}
        for key in ("prompt_text", "output_text"):
            if d[key] is None:
                del d[key]
        extra = {k: v for k, v in self.extra.items() if k != ANSWER_KEY}
        if extra:
            d["extra"] = copy.deepcopy(extra)
        else:
            del d["extra"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        """Inverse of ``to_dict``; unknown keys from newer writers are kept in ``extra``."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        unknown = {k: v for k, v in d.items() if k not in known}
        err = kwargs.get("error")
        if isinstance(err, dict):
            kwargs["error"] = ErrorInfo(
                kind=err.get("kind", "bad_payload"), detail=err.get("detail", "")
            )
        if unknown:
            kwargs["extra"] = {**kwargs.get("extra", {}), **unknown}
        return cls(**kwargs)


#: A request sent more than this many seconds after its schedule (``queue_delay_s``) is late:
#: the open-loop schedule no longer held for it. Steps publish their ``late_share``.
LATE_S = 0.05
#: A step whose ``late_share`` passes this (1 request in 20) fell behind its schedule.
BEHIND_SHARE = 0.05


def fell_behind(late_share: float) -> bool:
    """A step's client fell behind its schedule: more than 1 request in 20 was sent past
    ``LATE_S``. The live progress line and compare both say so, from this one rule."""
    return late_share > BEHIND_SHARE


def behind_words(late_share: float, queue_delay_p95: float | None) -> str:
    """How far behind, in the live line's and the report's words: "12 % sent over 50 ms
    late, p95 234 ms"."""
    p95 = "" if queue_delay_p95 is None else f", p95 {queue_delay_p95 * 1000:.0f} ms"
    return f"{late_share * 100:.0f} % sent over {LATE_S * 1000:.0f} ms late{p95}"


def counts_as_load(turn: float | None) -> bool:
    """Whether a request with this ``turn`` is load its step scheduled: every open-loop
    request (``turn`` None; NaN in analysis columns) and a conversation's first turn.

    Later turns follow an answer and a think time: they are not arrivals the step asked
    for (they carry its ``target_qps`` all the same), so counting them made a 4-turn
    scenario read about 4x its target. The one definition of a step's achieved load: the
    load process counts its sends with it (live) and compare counts records with it.
    """
    return turn is None or turn != turn or turn == 1


#: ``extra`` key holding a conversation turn's answer text for the next turn's history, in
#: memory only: ``to_dict`` never writes it (records hold text only with ``--store-text``).
ANSWER_KEY = "_answer"

#: Field names of ``RequestRecord`` in declaration order (``to_dict`` builds from them).
_RECORD_FIELDS = tuple(f.name for f in fields(RequestRecord))
