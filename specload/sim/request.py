"""One request's state inside the engine, and the sink that receives its output.

The engine never formats HTTP: it hands each step's new text to the request's ``Sink``
(``server.py`` writes SSE, the calibration driver records times). ``target_len`` fixes up front
how many tokens the request will produce (max_tokens, ignore_eos, min_tokens and the prompt's
natural EOS), so the output is identical whatever the batching, speculation or caching.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from specload.sim.spec import NgramIndex
from specload.sim.textgen import OutputText

__all__ = ["Request", "Sink"]


class Sink(Protocol):
    """Receives a request's output as the engine produces it."""

    def push(self, req: Request, text: str, n_tokens: int, finish: str | None, now: float) -> None:
        """New ``text`` (``n_tokens`` tokens) at engine time ``now``; ``finish`` on the last."""


@dataclass(slots=True, eq=False)
class Request:
    """Engine-side request; times are on the engine clock (seconds)."""

    rid: str
    prompt: list[str]
    text: OutputText
    target_len: int
    finish_reason: str
    sink: Sink
    arrival: float
    stop: tuple[str, ...] = ()
    block_hashes: list[int] = field(default_factory=list)
    ngram: NgramIndex | None = None
    # progress
    generated: int = 0
    computed: int = 0
    cached_tokens: int = 0
    anon_blocks: int = 0
    held_hashes: list[int] = field(default_factory=list)
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished: bool = False
    aborted: bool = False
    out_tail: str = ""
    stop_reason: str | None = None  # the stop string that ended the output, as vLLM reports

    @property
    def prefill_target(self) -> int:
        """Tokens whose KV must be computed before decoding (prompt + output after preemption)."""
        return len(self.prompt) + max(0, self.generated - 1) if self.generated else len(self.prompt)

    @property
    def held_blocks(self) -> int:
        return self.anon_blocks + len(self.held_hashes)
