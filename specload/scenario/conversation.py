"""Multi-turn conversations: what a scenario's ``conversation:`` key asks for.

Chat traffic is conversations: each turn sends the whole history, the model's earlier answers
included, so the prompt grows turn by turn and prefix caching can reuse all of it. With
``conversation: {turns: N, think_time_s: T}`` every open-loop arrival starts a conversation
(``steps`` are conversation starts per second); when a turn's answer has arrived, the next turn
follows ``T`` seconds later (the user reading and typing) with the history, the answer and a
follow-up message. Records carry ``conversation_id`` and ``turn``; compare answers per turn
(TTFT of turn 3 is the one prefix caching shortens).

``think_time_s`` is a number of seconds or ``{dist: exponential, mean}`` /
``{dist: uniform, min, max}``, drawn per conversation and turn from a seeded stream. The
follow-up message is seeded text of ``follow_up_tokens`` words (``scenario/prompts.py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specload.core.pacer import derive_seed
from specload.scenario.keys import unknown_key
from specload.scenario.words import prose_pieces

__all__ = ["ConversationSpec", "parse_conversation"]

_KEYS = {"turns", "think_time_s", "follow_up_tokens"}
THINK_DISTS = ("fixed", "exponential", "uniform")


@dataclass(frozen=True, slots=True)
class ConversationSpec:
    """Turns per conversation, the think time between an answer and the next turn, and the
    length of each follow-up message."""

    turns: int
    think_dist: str = "fixed"
    think_mean_s: float = 0.0
    think_min_s: float = 0.0
    think_max_s: float = 0.0
    follow_up_tokens: int = 32

    def think_time(self, seed: int, conversation: str, turn: int) -> float:
        """Seconds between the answer to ``turn`` and the next turn (pure, seeded)."""
        if self.think_dist == "fixed":
            return self.think_mean_s
        rng = random.Random(derive_seed(seed, "think", conversation, turn))
        if self.think_dist == "exponential":
            return rng.expovariate(1.0 / self.think_mean_s) if self.think_mean_s > 0 else 0.0
        return rng.uniform(self.think_min_s, self.think_max_s)

    def follow_up(self, seed: int, prompt_index: int, turn: int) -> str:
        """The user's message of ``turn`` (2, 3, ...) in the conversation of ``prompt_index``."""
        rng = random.Random(derive_seed(seed, "follow-up", prompt_index, turn))
        words = "".join(p for p in prose_pieces(rng, self.follow_up_tokens) if p != "\n")
        return "Thanks. Now, about what you said: " + words.strip()

    def to_dict(self) -> dict[str, Any]:
        think: Any = self.think_mean_s
        if self.think_dist == "exponential":
            think = {"dist": "exponential", "mean": self.think_mean_s}
        elif self.think_dist == "uniform":
            think = {"dist": "uniform", "min": self.think_min_s, "max": self.think_max_s}
        return {
            "turns": self.turns,
            "think_time_s": think,
            "follow_up_tokens": self.follow_up_tokens,
        }


def _seconds(fail: Callable[[str, str], Exception], v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise fail(path, f"got {v!r} (expected seconds >= 0)")
    return float(v)


def parse_conversation(value: Any, fail: Callable[[str, str], Exception]) -> ConversationSpec:
    """``conversation: {turns, think_time_s, follow_up_tokens}``; ``fail(path, problem)``
    builds the error naming the file."""
    if not isinstance(value, dict):
        raise fail("conversation", f"got {value!r} (expected {{turns: N, think_time_s: T}})")
    unknown = sorted(set(map(str, value)) - _KEYS)
    if unknown:
        raise fail(
            f"conversation.{unknown[0]}",
            unknown_key(unknown[0], _KEYS),
        )
    turns = value.get("turns")
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 2:
        raise fail("conversation.turns", f"got {turns!r} (expected an integer >= 2)")
    words = value.get("follow_up_tokens", 32)
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise fail("conversation.follow_up_tokens", f"got {words!r} (expected an integer >= 1)")
    think = value.get("think_time_s", 0.0)
    path = "conversation.think_time_s"
    if not isinstance(think, dict):
        return ConversationSpec(turns, "fixed", _seconds(fail, think, path), follow_up_tokens=words)
    dist = think.get("dist")
    if dist == "exponential":
        mean = _seconds(fail, think.get("mean"), f"{path}.mean")
        return ConversationSpec(turns, dist, mean, follow_up_tokens=words)
    if dist == "uniform":
        lo = _seconds(fail, think.get("min"), f"{path}.min")
        hi = _seconds(fail, think.get("max"), f"{path}.max")
        if hi < lo:
            raise fail(f"{path}.max", f"got {hi:g} (expected >= min {lo:g})")
        return ConversationSpec(turns, dist, (lo + hi) / 2, lo, hi, follow_up_tokens=words)
    if dist == "fixed":
        mean = _seconds(fail, think.get("mean"), f"{path}.mean")
        return ConversationSpec(turns, dist, mean, follow_up_tokens=words)
    raise fail(f"{path}.dist", f"got {dist!r} (expected one of {', '.join(THINK_DISTS)})")
