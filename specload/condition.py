"""One server condition of a sweep: ``NAME=FLAGS`` and what those flags declare.

A condition is the extra server flags that make it (``spec=--speculative-config {...}``),
split as a shell would. What the flags declare, the speculative config (JSON, as vLLM takes
it) and whether prefix caching is on, goes into ``run.json`` so compare can tell baseline,
spec-only, prefix-only and both apart. A malformed condition is a ``ConfigError`` that names
it, raised before any server starts (a vLLM start can take minutes).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from specload.errors import ConfigError

__all__ = ["Condition", "parse_condition"]

_SPEC_FLAGS = ("--speculative-config", "--speculative_config")
_SPEC_UNQUOTED = re.compile(r"(?:^|\s)--speculative[-_]config(?:=|\s+)\{")
_PREFIX_ON = ("--enable-prefix-caching", "--enable_prefix_caching")
_PREFIX_OFF = ("--no-enable-prefix-caching", "--no_enable_prefix_caching")


@dataclass(frozen=True)
class Condition:
    """One server condition: a label and the flags added to the server command for it.

    ``speculative`` and ``prefix_caching`` are what the flags declare (``None``: not said,
    the server's default applies), written to ``run.json`` so compare can attribute effects.
    """

    name: str
    flags: tuple[str, ...] = ()
    speculative: dict[str, Any] | None = None
    prefix_caching: bool | None = None

    def as_json(self) -> dict[str, Any]:
        return {"speculative": self.speculative, "prefix_caching": self.prefix_caching}


def parse_condition(text: str, default_prefix_caching: bool | None = None) -> Condition:
    """``NAME=FLAGS`` (flags split like a shell would) into a ``Condition``.

    ``baseline=`` is a condition with no extra flags. The speculative config must be JSON,
    as vLLM requires; a typo is reported here, before any server starts.
    """
    where = f"--condition {text!r}"
    name, sep, flag_text = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(
            "expected NAME=FLAGS, e.g. baseline= or prefix=--enable-prefix-caching", path=where
        )
    if not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigError("NAME may hold only letters, digits, '-', '_' and '.'", path=where)
    flags = _split_flags(flag_text, where)
    prefix = default_prefix_caching
    spec_text: str | None = None
    for i, flag in enumerate(flags):
        key, eq, value = flag.partition("=")
        if key in _SPEC_FLAGS:
            spec_text = value if eq else (flags[i + 1] if i + 1 < len(flags) else "")
        elif flag in _PREFIX_ON:
            prefix = True
        elif flag in _PREFIX_OFF:
            prefix = False
    spec = _parse_spec_json(spec_text, where) if spec_text is not None else None
    return Condition(name=name, flags=flags, speculative=spec, prefix_caching=prefix)


def _split_flags(text: str, where: str) -> tuple[str, ...]:
    """Split like a shell, except that an unquoted JSON object after ``--speculative-config``
    is kept verbatim: ``spec=--speculative-config {"method":"ngram"}`` means what it says,
    although a shell split would strip the JSON's double quotes.
    """
    match = _SPEC_UNQUOTED.search(text)
    raw_json = _balanced_braces(text, match.end() - 1) if match else None
    if match and raw_json is not None:
        end = match.end() - 1 + len(raw_json)
        head, tail = text[: match.end() - 1], text[end:]
        try:
            before, after = shlex.split(head), shlex.split(tail)
        except ValueError as exc:
            raise ConfigError(f"cannot split the flags ({exc})", path=where) from exc
        if head.endswith("="):  # --speculative-config={...}
            return (*before[:-1], before[-1] + raw_json, *after)
        return (*before, raw_json, *after)
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"cannot split the flags ({exc})", path=where) from exc


def _balanced_braces(text: str, start: int) -> str | None:
    """The ``{...}`` object starting at ``text[start]``, skipping braces inside JSON strings."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def _parse_spec_json(text: str, where: str) -> dict[str, Any]:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--speculative-config is not valid JSON ({exc.msg} at char {exc.pos})", path=where
        ) from exc
    if not isinstance(spec, dict):
        raise ConfigError("--speculative-config must be a JSON object", path=where)
    return spec
