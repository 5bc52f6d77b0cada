"""Seeded text pieces for synthetic prompts: word salad and code-like lines.

Shared by the synthetic prompt builder (``scenario/prompts.py``), the example workloads
(``scripts/sample_workloads.py``) and conversation follow-ups (``scenario/conversation.py``).
Each piece is about one token, so a piece count is a token budget; the text is meaningless but
has the statistics that matter (length, and for code, self-repetition that n-gram drafting
can find).
"""

from __future__ import annotations

import random

__all__ = ["code_pieces", "prose_pieces"]

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "my",
    "now",
    "such",
    "like",
    "our",
    "over",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
]
_IDENTS = [
    "value",
    "total",
    "count",
    "index",
    "item",
    "result",
    "data",
    "node",
    "key",
    "name",
    "size",
    "offset",
    "buffer",
    "items",
    "values",
    "left",
    "right",
    "parent",
    "child",
    "start",
    "end",
    "step",
    "scale",
    "limit",
]
_OPS = ("+", "-", "*")


def prose_pieces(rng: random.Random, n: int) -> list[str]:
    """``n`` pieces of word salad: " word" pieces, a period and newline now and then
    (about one token each; also the example workloads' text)."""
    out: list[str] = []
    for _ in range(n):
        out.append(" " + rng.choice(_WORDS) if out and out[-1] != "\n" else rng.choice(_WORDS))
        if rng.random() < 0.06:
            out.append(".")
            out.append("\n")
    return out[:n]


def _code_line(rng: random.Random) -> list[str]:
    a, b, c = (rng.choice(_IDENTS) for _ in range(3))
    op, idx = rng.choice(_OPS), str(rng.randint(0, 99))
    return ["   ", f" {a}", " =", f" {b}", f" {op}", f" {c}", "[", idx, "]", "\n"]


def code_pieces(rng: random.Random, repetition: float, n: int) -> list[str]:
    """Code-like lines, each a copy of an earlier one with probability ``repetition``."""
    lines: list[list[str]] = []
    out: list[str] = []
    while len(out) < n:
        line = rng.choice(lines) if lines and rng.random() < repetition else _code_line(rng)
        lines.append(line)
        out.extend(line)
    return out[:n]
