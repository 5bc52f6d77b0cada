"""Preparing a run's prompt set once, where the run is controlled (the master, or the local
runner), so every load process sends the same prompts.

Why here and not in every worker: a prompt set of exact token length costs a few
``/tokenize`` requests per prompt. When each worker built its own, N workers sent N times the
requests to a server that may be busy, and one reset in any of them failed the whole run.
Built once, the set is shipped in ``RunStart`` with its hash (``PromptSet.sha256``), which
run.json records: the set is part of the run's identity.

A ``/tokenize`` that keeps failing after its retries (``specload/core/retry.py``) falls back to the
documented estimate (one token per word or punctuation mark), with a warning in run.json, or,
when the scenario says ``prompts.synthetic.exact_tokens: true``, fails the run with one line.
A server without ``/tokenize`` at all is the estimate too, and the same rule applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specload.core.errors import SpecloadError
from specload.scenario.prompts import (
    PromptSet,
    Tokenize,
    TokenizeFailed,
    build_prompt_set,
    server_tokenizer,
)
from specload.scenario.schema import Scenario

__all__ = ["PreparedPrompts", "PreparationFailed", "prepare_prompts"]

log = logging.getLogger("specload")

TokenizerFactory = Callable[[str, str | None, str | None], Tokenize | None]


class PreparationFailed(SpecloadError):
    """The scenario demands exact token counts and the server could not give them."""


@dataclass(frozen=True, slots=True)
class PreparedPrompts:
    """A run's prompt set and what preparing it met (warnings go into run.json)."""

    prompts: PromptSet
    warnings: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        """run.json's ``prompt_set``: the hash, the size and how tokens were counted."""
        return {
            "sha256": self.prompts.sha256,
            "count": len(self.prompts),
            "token_count_source": self.prompts.token_count_source,
            "exact": self.prompts.exact,
            "format": self.prompts.source_format,
            "warnings": list(self.warnings),
        }


def prepare_prompts(
    scenario: Scenario,
    base_url: str,
    model: str | None,
    api_key: str | None,
    *,
    tokenizer: TokenizerFactory = server_tokenizer,
) -> PreparedPrompts:
    """The scenario's prompt set, counted by the server where it can (see module doc)."""
    try:
        return _prepare(scenario, base_url, model, api_key, tokenizer)
    except PreparationFailed:
        raise
    except SpecloadError as exc:  # a prompt file changed since it was checked: its one line
        raise PreparationFailed(str(exc)) from None


def _prepare(
    scenario: Scenario,
    base_url: str,
    model: str | None,
    api_key: str | None,
    tokenizer: TokenizerFactory,
) -> PreparedPrompts:
    exact = scenario.prompts.kind == "synthetic" and scenario.prompts.exact_tokens
    tokenize = tokenizer(base_url, model, api_key)
    if tokenize is None:
        if exact:
            raise PreparationFailed(
                f"{base_url} has no usable /tokenize and the scenario sets "
                "prompts.synthetic.exact_tokens: true (exact prompt lengths need the "
                "server's count)"
            )
        return PreparedPrompts(build_prompt_set(scenario, None))
    try:
        return PreparedPrompts(build_prompt_set(scenario, tokenize))
    except TokenizeFailed as exc:
        if exact:
            raise PreparationFailed(
                f"/tokenize kept failing after retries ({exc}) and the scenario sets "
                "prompts.synthetic.exact_tokens: true"
            ) from None
        warning = (
            f"/tokenize kept failing after retries ({exc}); prompt lengths are estimates "
            "(one token per word or punctuation mark), not the server's count"
        )
        log.warning("%s", warning)
        return PreparedPrompts(build_prompt_set(scenario, None), (warning,))
