"""One server condition of a sweep: ``NAME=FLAGS`` and what those flags declare.

A condition is the extra server flags that make it (``spec=--speculative-config {...}``),
split as a shell would. What the flags (and the server command they are appended to) say
explicitly, the speculative config (JSON, as vLLM takes it) and whether prefix caching is on,
goes into ``run.json`` (``condition``, with ``condition.source`` saying which fields are
declared) so compare can tell baseline, spec-only, prefix-only and both apart. What no flag
says is left unknown, never assumed (a wrapper script may turn speculation on; vLLM V1 turns
prefix caching on by default): compare reads it from the server's own /metrics. A malformed condition is a ``ConfigError`` that names it,
raised before any server starts (a vLLM start can take minutes).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError

__all__ = [
    "BASELINE",
    "Condition",
    "choose_baseline",
    "declared_condition",
    "declared_speculative",
    "parse_condition",
]

#: the label that makes a condition the baseline, whatever order it was given in
BASELINE = "baseline"

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
    #: which of ``speculative`` / ``prefix_caching`` are declared (else: unknown)
    declared: tuple[str, ...] = ()

    def runs_speculation(self, managed: bool) -> bool | None:
        """Whether this condition's server speculates; ``None``: unknown. A managed server's
        whole command is known, so no ``--speculative-config`` in it means none."""
        if self.speculative is not None:
            return True
        return False if managed or "speculative" in self.declared else None

    def as_json(self) -> dict[str, Any]:
        """run.json ``condition``: values plus ``source`` ("declared" / "unknown")."""
        return declared_condition(
            self.speculative,
            "speculative" in self.declared,
            self.prefix_caching if "prefix_caching" in self.declared else None,
        )


def parse_condition(
    text: str, default_prefix_caching: bool | None = None, template: str | None = None
) -> Condition:
    """``NAME=FLAGS`` (flags split like a shell would) into a ``Condition``.

    ``baseline=`` is a condition with no extra flags. The speculative config must be JSON,
    as vLLM requires; a typo is reported here, before any server starts. ``template``: the
    server command the flags are appended to (a managed sweep), read too, so that the
    condition declares what the server really runs; None for a server someone else manages.
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
    base = _template_flags(template) if template is not None else ()
    spec_text, prefix = _scan((*base, *flags))
    if prefix is None:
        prefix = default_prefix_caching
    spec = _parse_spec_json(spec_text, where) if spec_text is not None else None
    declared = tuple(
        f for f, v in (("speculative", spec), ("prefix_caching", prefix)) if v is not None
    )
    return Condition(
        name=name, flags=flags, speculative=spec, prefix_caching=prefix, declared=declared
    )


def _scan(flags: tuple[str, ...]) -> tuple[str | None, bool | None]:
    """The last ``--speculative-config`` value and prefix-caching flag in ``flags``."""
    prefix: bool | None = None
    spec_text: str | None = None
    for i, flag in enumerate(flags):
        key, eq, value = flag.partition("=")
        if key in _SPEC_FLAGS:
            spec_text = value if eq else (flags[i + 1] if i + 1 < len(flags) else "")
        elif flag in _PREFIX_ON:
            prefix = True
        elif flag in _PREFIX_OFF:
            prefix = False
    return spec_text, prefix


def _template_flags(template: str) -> tuple[str, ...]:
    """The server command's own words, as far as a shell split can tell (else none)."""
    try:
        return _split_flags(template, "--server-cmd")
    except ConfigError:
        return ()


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


#: ``--speculative-config`` values that declare "no speculation" (``specload run``, Locust).
SPEC_OFF = ("off", "none")


def declared_speculative(text: str) -> tuple[dict[str, Any] | None, bool]:
    """A ``--speculative-config`` value given to ``specload run`` / the Locust plugin: the
    config and whether anything was declared. "" declares nothing; ``off`` declares no
    speculation; a JSON object declares that config. Anything else is a ``ConfigError``."""
    text = text.strip()
    if not text:
        return None, False
    if text.lower() in SPEC_OFF:
        return None, True
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"not valid JSON ({exc}); expected the server's JSON object, or 'off'",
            path="--speculative-config",
        ) from None
    if not isinstance(value, dict):
        raise ConfigError("must be a JSON object, or 'off'", path="--speculative-config")
    return value, True


def declared_condition(
    speculative: dict[str, Any] | None, spec_declared: bool, prefix_caching: bool | None
) -> dict[str, Any]:
    """run.json ``condition`` for a run told what its server runs (or not)."""
    return {
        "speculative": speculative,
        "prefix_caching": prefix_caching,
        "source": {
            "speculative": "declared" if spec_declared else "unknown",
            "prefix_caching": "declared" if prefix_caching is not None else "unknown",
        },
    }


def choose_baseline(speculates: dict[str, bool | None], requested: str | None = None) -> str:
    """The baseline among the conditions of ``speculates`` (label -> whether its server runs
    speculative decoding, ``None`` when unknown), in the order the user gave them.

    The condition labelled ``baseline``, else the one ``--baseline LABEL`` names, else the
    first given. A wrong baseline is a silent wrong answer (every change is read against it),
    so a choice that reads two ways is a ``ConfigError`` (exit 2): ``--baseline`` naming
    another condition than the one labelled ``baseline``, or, with neither, the first given
    running speculation while another does not say it does (unknown counts: asking costs the
    user one flag, guessing may cost a wrong answer). Sweeps call this before any traffic.
    """
    labels = list(speculates)
    if not labels:
        raise ConfigError("no condition to choose a baseline from", path="--baseline")
    if requested is not None:
        if requested not in speculates:
            raise ConfigError(
                f"{requested!r} is no condition (conditions: {', '.join(labels)})",
                path="--baseline",
            )
        if BASELINE in speculates and requested != BASELINE:
            raise ConfigError(
                f"names {requested!r}, but another condition is labelled {BASELINE!r}: "
                "rename that one, or drop --baseline",
                path="--baseline",
            )
        return requested
    if BASELINE in speculates:
        return BASELINE
    first = labels[0]
    plain = [label for label in labels[1:] if not speculates[label]]
    if speculates[first] and plain:
        raise ConfigError(
            f"which condition is the baseline? {first!r}, given first, runs speculative "
            f"decoding and {plain[0]!r} does not say so: say --baseline LABEL, or label "
            f"the baseline {BASELINE!r}",
            path="--baseline",
        )
    return first
