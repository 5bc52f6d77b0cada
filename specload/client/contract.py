"""The output contract of one response, and the privacy-preserving fingerprints of its text.

Judging speculative decoding by string equality is wrong: what must not change
is the contract — the JSON parses, required fields are present, tool calls are made, the
stop point is the same. These checks run per request in the client and land in the record
(``json_valid``, ``tool_calls``, ``extra["missing_fields"]``), so the analysis never needs
the text. Text itself is reduced to a SHA-256 and a length unless the user opts in to
``--store-text``; the same prompt and the same output give the same hash in every run, which
is what "exact match at temperature 0" compares.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ContractResult", "check_output", "messages_sha256", "sha256_text"]


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_sha256(messages: Sequence[dict[str, Any]]) -> tuple[str, int]:
    """``(sha256, chars)`` of a chat prompt: canonical JSON hash, total content characters."""
    canon = orjson.dumps(list(messages), option=orjson.OPT_SORT_KEYS)
    chars = sum(len(m.get("content") or "") for m in messages if isinstance(m.get("content"), str))
    return hashlib.sha256(canon).hexdigest(), chars


@dataclass(frozen=True, slots=True)
class ContractResult:
    """``json_valid`` is None when JSON was not asked for; ``missing_fields`` lists names."""

    json_valid: bool | None
    missing_fields: tuple[str, ...]


def _strip_fence(text: str) -> str:
    """Models often wrap JSON in a Markdown code fence; the contract is about the JSON."""
    t = text.strip()
    if t.startswith("```"):
        first_nl = t.find("\n")
        if first_nl >= 0 and t.endswith("```"):
            return t[first_nl + 1 : -3].strip()
    return t


def check_output(
    text: str, *, want_json: bool, required_fields: Sequence[str] = ()
) -> ContractResult:
    """Check ``text`` against the scenario's contract (JSON + required top-level fields)."""
    if not want_json:
        return ContractResult(json_valid=None, missing_fields=())
    try:
        value = orjson.loads(_strip_fence(text))
    except orjson.JSONDecodeError:
        return ContractResult(json_valid=False, missing_fields=tuple(required_fields))
    if not isinstance(value, dict):
        missing = tuple(required_fields)
    else:
        missing = tuple(f for f in required_fields if f not in value)
    return ContractResult(json_valid=True, missing_fields=missing)
