"""A small deterministic tokenizer shared by /tokenize, usage counts and length checks.

Why its own tokenizer: the simulator must be self-contained and the client sizes prompts with
``/tokenize``, so the count it returns must be exactly the ``prompt_tokens`` the engine charges.
A token is a run of word characters with its leading whitespace (``" hello"``), one other
non-space character with its leading whitespace (``" ,"``), or trailing whitespace. Joining the
token strings gives the text back byte for byte, so output text is the concatenation of tokens.

Chat messages are templated as ``<|role|>`` + content tokens + ``<|end|>`` per message, plus one
``<|assistant|>`` token when ``add_generation_prompt`` is true (the default); each ``<|...|>``
marker is one token. Token ids are CRC-32 of the token's UTF-8 bytes (stable across processes).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "chat_tokens",
    "message_text",
    "token_ids",
    "tokenize",
]

_TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings whose concatenation is ``text``."""
    return _TOKEN_RE.findall(text)


def token_ids(tokens: Iterable[str]) -> list[int]:
    """Stable integer ids (CRC-32) for token strings, as ``/tokenize`` reports them."""
    return [zlib.crc32(t.encode("utf-8")) for t in tokens]


def message_text(content: Any) -> str:
    """The text of a chat message's ``content``: a string, or a list of ``{"type": "text"}`` parts.

    Raises ``ValueError`` naming what was wrong, which the server turns into a 400.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
            else:
                raise ValueError("message content parts must be {'type': 'text', 'text': str}")
        return "".join(parts)
    raise ValueError("message content must be a string or a list of text parts")


def chat_tokens(messages: Sequence[Any], add_generation_prompt: bool = True) -> list[str]:
    """Template chat ``messages`` into prompt tokens (see the module docstring for the format)."""
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise ValueError("messages must be a non-empty list")
    out: list[str] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping) or not isinstance(msg.get("role"), str):
            raise ValueError(f"messages[{i}] must be an object with a string 'role'")  # noqa: TRY004
        out.append(f"<|{msg['role']}|>")
        out.extend(tokenize(message_text(msg.get("content"))))
        out.append("<|end|>")
    if add_generation_prompt:
        out.append("<|assistant|>")
    return out
