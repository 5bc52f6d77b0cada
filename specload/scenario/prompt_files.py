"""Prompt files in the formats people already have: specload JSONL, ShareGPT, OpenAI request logs.

Whether drafting pays depends on the content, so users bring their own prompts. Three formats
are read, the format detected from the file itself and reported in run.json
(``prompt_set.format``):

- ``specload``: JSONL, one ``{"messages": [...]}`` per line, optionally with ``"category"``
  (any string: the class the comparison answers per), ``"max_tokens"`` (this request's output
  cap; the scenario's is the default) and ``"id"``.
- ``sharegpt``: a JSON list (or JSONL) of ``{"id", "conversations": [{"from", "value"}]}``,
  as vLLM ``bench serve --dataset-name sharegpt`` reads it: the prompt is the system turn, if
  any, and the first human turn; ``"category"`` and ``"max_tokens"`` are read when present.
- ``openai-log``: JSONL of logged chat-completions requests, ``{"body": {"messages": [...],
  "max_tokens" | "max_completion_tokens"}}`` (the Batch API's request lines have this shape;
  ``custom_id`` becomes the id); ``"category"`` at the top level or in ``body.metadata``.

Anything else is bad input: one line naming the file, the line (or list item) and what was
expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError

__all__ = ["FORMATS", "FileEntry", "json_lines", "read_prompt_file"]

FORMATS = ("specload", "sharegpt", "openai-log")
_EXPECTED = (
    'expected JSONL of {"messages": [...]} (specload), ShareGPT {"conversations": [{"from", '
    '"value"}]} or OpenAI request logs {"body": {"messages": [...]}}'
)
_SHAREGPT_ROLES = {"human": "user", "user": "user", "system": "system"}


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One prompt read from a file: chat messages and what the line says about it."""

    messages: tuple[dict[str, Any], ...]
    category: str | None = None
    max_tokens: int | None = None
    id: str | None = None


def _detect(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    if "messages" in obj:
        return "specload"
    if "conversations" in obj:
        return "sharegpt"
    if "body" in obj:
        return "openai-log"
    return None


def json_lines(text: str, file: str, expected: str) -> list[tuple[str, Any]]:
    """``("line N", object)`` per non-empty line of a JSONL text; a line that is not JSON is
    one error naming the file, the line and ``expected`` (prompt files and traces)."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"not JSON ({exc.msg}; {expected})", file=file, path=f"line {lineno}"
                ) from None
    return rows


def _items(file: str) -> tuple[list[tuple[str, Any]], str]:
    """``(where, object)`` per entry, and the format of the first one."""
    with open(file, encoding="utf-8") as fh:
        text = fh.read()
    if text.lstrip().startswith("["):  # one JSON list: ShareGPT's own layout
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not JSON ({exc.msg}; {_EXPECTED})", file=file) from None
        entries = [(f"[{i}]", x) for i, x in enumerate(items)]
    else:
        entries = json_lines(text, file, _EXPECTED)
    if not entries:
        raise ConfigError(f"no prompts ({_EXPECTED})", file=file)
    where, first = entries[0]
    fmt = _detect(first)
    if fmt is None:
        keys = ", ".join(sorted(first)) if isinstance(first, dict) else type(first).__name__
        raise ConfigError(f"unknown format (found {keys}; {_EXPECTED})", file=file, path=where)
    return entries, fmt


def _check_messages(msgs: Any, file: str, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(msgs, list) or not msgs:
        raise ConfigError('expected a non-empty "messages" list', file=file, path=where)
    for j, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise ConfigError(
                'expected {"role": str, "content": ...}', file=file, path=f"{where}.messages[{j}]"
            )
    return tuple(msgs)


def _int_or_none(value: Any, file: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"got {value!r} (expected an integer >= 1)", file=file, path=where)
    return value


def _str_or_none(value: Any, file: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ConfigError(f"got {value!r} (expected a string)", file=file, path=where)
    return str(value)


def _sharegpt(obj: dict[str, Any], file: str, where: str) -> tuple[dict[str, Any], ...]:
    turns = obj.get("conversations")
    if not isinstance(turns, list):
        raise ConfigError('expected a "conversations" list', file=file, path=where)
    msgs: list[dict[str, Any]] = []
    for j, t in enumerate(turns):
        if not isinstance(t, dict) or not isinstance(t.get("value"), str):
            raise ConfigError(
                'expected {"from": str, "value": str}',
                file=file,
                path=f"{where}.conversations[{j}]",
            )
        role = _SHAREGPT_ROLES.get(str(t.get("from")))
        if role is not None:
            msgs.append({"role": role, "content": t["value"]})
        if role == "user":  # the first human turn is the prompt
            return tuple(msgs)
    raise ConfigError("no human turn (expected a 'from': 'human' turn)", file=file, path=where)


def _entry(fmt: str, obj: Any, file: str, where: str) -> FileEntry:
    if _detect(obj) != fmt:
        raise ConfigError(
            f"not a {fmt} entry like the first one ({_EXPECTED})", file=file, path=where
        )
    if fmt == "specload":
        messages = _check_messages(obj["messages"], file, where)
        cap, cid, ident = obj.get("max_tokens"), obj.get("category"), obj.get("id")
    elif fmt == "sharegpt":
        messages = _sharegpt(obj, file, where)
        cap, cid, ident = obj.get("max_tokens"), obj.get("category"), obj.get("id")
    else:
        body = obj["body"]
        if not isinstance(body, dict):
            raise ConfigError("expected a request body object", file=file, path=f"{where}.body")
        messages = _check_messages(body.get("messages"), file, f"{where}.body")
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        cid = obj.get("category") or (body.get("metadata") or {}).get("category")
        ident = obj.get("custom_id", obj.get("id"))
    return FileEntry(
        messages=messages,
        category=_str_or_none(cid, file, f"{where}.category"),
        max_tokens=_int_or_none(cap, file, f"{where}.max_tokens"),
        id=_str_or_none(ident, file, f"{where}.id"),
    )


def read_prompt_file(file: str, count: int = 0) -> tuple[list[FileEntry], str]:
    """The entries of ``file`` in order (the first ``count``; 0: all) and its format."""
    items, fmt = _items(file)
    entries: list[FileEntry] = []
    for where, obj in items:
        entries.append(_entry(fmt, obj, file, where))
        if count and len(entries) >= count:
            break
    return entries, fmt
