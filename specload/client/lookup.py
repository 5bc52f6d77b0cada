"""Would prompt lookup (n-gram drafting) have helped this request? Measured on the fly.

Before anyone pays for a draft model, the cheap question is whether the traffic repeats itself.
vLLM's n-gram proposer (``speculative_config: {"method": "ngram", "prompt_lookup_min": a,
"prompt_lookup_max": b}``) looks for the longest suffix of the context, ``a..b`` tokens long,
that occurred earlier in the context (prompt + output so far), takes its *earliest* occurrence,
and proposes the tokens that followed it. This module replays that rule while a response
streams in and counts, per output token, whether the proposer's next-token guess was right:

    lookup_match_rate = output tokens the proposer would have guessed / output tokens

It is the position-0 hit rate of an ideal n-gram drafter, independent of
``num_speculative_tokens``: near zero means n-gram/suffix drafting has nothing to propose;
a high rate means drafts would often be accepted. It is a client-side estimate, not the
server's acceptance rate (the server's tokenizer and chat template differ from ours).

Tokens: the ids of a real tokenizer when the user gives a local ``tokenizer.json``
(``method == "tokenizer"``), else a word-level approximation (``method == "words"``: runs of
word characters or single punctuation marks with their leading whitespace, the simulator's own
rule). The method is written to ``run.json`` as ``lookup_method``.

Cost: it runs in the client's per-chunk hot path, so it keeps a rolling index
``n-gram -> position after its first occurrence``; each output token costs
``prompt_lookup_max - prompt_lookup_min + 1`` tuple builds and dict probes, O(1) in the length
of the context. ``benchmarks/lookup_speed.py`` measures it in µs per output token. No text is
stored: the index holds token ids (or word strings, in memory only, for one request).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from specload.core.errors import ConfigError

__all__ = [
    "DEFAULT_LOOKUP_MAX",
    "DEFAULT_LOOKUP_MIN",
    "HFTokenizer",
    "LookupMatcher",
    "LookupResult",
    "SplitTokenizer",
    "WordTokenizer",
    "load_tokenizer",
    "match_rate_of",
    "prompt_text",
]

#: vLLM's defaults when a speculative config names neither bound (SpeculativeConfig: 5 and 5).
#: specload defaults to a wider window, 2..5, so short repeats count too; scenarios may set both.
DEFAULT_LOOKUP_MIN = 2
DEFAULT_LOOKUP_MAX = 5

#: Token id that separates chat messages, so an n-gram never spans two messages.
_MESSAGE_BREAK_ID = (1 << 64) - 1
_MASK = (1 << 64) - 1
_MAX_PENDING_CHARS = 256
_KEEP_CHARS = 32
_BASE = 0x100000001B3  # FNV-64 prime: odd, so multiplication mod 2**64 is a bijection

_WORD_RE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")


class SplitTokenizer(Protocol):
    """What the matcher needs from a tokenizer: text to integer token ids, and a held tail.

    ``split(text)`` returns the ids of ``text`` except the last one and the text of that last
    token, which the next chunk may still extend (a word cut in two by the stream). ``method``
    names the approximation: ``"tokenizer"`` or ``"words"``.
    """

    method: str

    def split(self, text: str) -> tuple[list[int], str]: ...

    def encode(self, text: str) -> list[int]: ...


class WordTokenizer:
    """Word-level approximation: no files needed; ids are the tokens' string hashes.

    Real BPE tokenizers split rare words further (≈1.3 tokens per English word), so rates are
    close to, not equal to, what the server's tokenizer would see.
    """

    method = "words"

    def encode(self, text: str) -> list[int]:
        return [hash(t) & _MASK for t in _WORD_RE.findall(text)]

    def split(self, text: str) -> tuple[list[int], str]:
        toks = _WORD_RE.findall(text)
        if not toks:
            return [], text
        tail = toks.pop()
        return [hash(t) & _MASK for t in toks], tail


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer read from a local ``tokenizer.json`` (no hub).

    Streamed text is re-split at chunk edges: the tokens of the last word of each chunk are
    held back and re-encoded with the next chunk, so a word cut by the stream is tokenized as
    the server would (exactly so for tokenizers whose pre-tokenizer splits on words).
    """

    method = "tokenizer"

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def split(self, text: str) -> tuple[list[int], str]:
        enc = self._tok.encode(text, add_special_tokens=False)
        ids = enc.ids
        if not ids:
            return [], text
        # Hold back every token of the last pre-tokenized word: the next chunk may extend the
        # word, and BPE may then merge it differently ("ret" + "urn" -> "return").
        first = len(ids) - 1
        words = enc.word_ids
        if words and words[-1] is not None:
            while first > 0 and words[first - 1] == words[-1]:
                first -= 1
        return list(ids[:first]), text[enc.offsets[first][0] :]


def load_tokenizer(path: str | Path | None) -> SplitTokenizer:
    """The tokenizer for lookup matching: ``tokenizer.json`` at ``path`` (or in that folder).

    ``None`` gives the word-level approximation. A path that does not hold a readable
    tokenizer, or a missing ``tokenizers`` package, is a ``ConfigError`` naming the path.
    """
    if path is None or str(path) == "":
        return WordTokenizer()
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise ConfigError(
            "no tokenizer.json there (expected a local file or a folder holding one)",
            file=str(path),
        )
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - tokenizers ships with the dev extra
        raise ConfigError(
            "reading a tokenizer needs the 'tokenizers' package", file=str(path)
        ) from exc
    try:
        return HFTokenizer(Tokenizer.from_file(str(p)))
    except Exception as exc:  # the Rust side raises plain Exception subclasses
        raise ConfigError(
            f"not a tokenizers JSON file ({exc.__class__.__name__})", file=str(p)
        ) from exc


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of each chat message (string content or text parts), in order."""
    out: list[str] = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.append("".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping)))
    return out


@dataclass(frozen=True, slots=True)
class LookupResult:
    """Output tokens seen and how many the n-gram proposer would have guessed."""

    output_tokens: int
    matched_tokens: int
    method: str

    @property
    def match_rate(self) -> float | None:
        """Matched share of output tokens; ``None`` when there was no output to judge."""
        return self.matched_tokens / self.output_tokens if self.output_tokens else None


class LookupMatcher:
    """Incremental prompt-lookup replay for one request: feed streamed text, read the rate.

    ``feed(delta)`` per content chunk, ``finish()`` once at the end (it flushes the held-back
    last token). Tokens from the prompt only build the index; tokens from the output are judged
    and then indexed, so later output can match earlier output, as in vLLM.

    The index maps a 64-bit polynomial hash of each n-gram (``sum x[s+i] * B**(n-1-i)``, wrap
    at 2**64) to the position after its first occurrence. Hashes, not tuples: the prompt's
    n-grams are hashed in one vectorised numpy pass and no tuple is allocated per token. The
    follower token is compared exactly; a hash collision (odds ~ 2**-64 per probe) could only
    make one token count as matched.
    """

    __slots__ = ("_hits", "_ids", "_index", "_max", "_min", "_n_out", "_pending", "_tok")

    def __init__(
        self,
        prompt: Iterable[str] = (),
        tokenizer: SplitTokenizer | None = None,
        min_n: int = DEFAULT_LOOKUP_MIN,
        max_n: int = DEFAULT_LOOKUP_MAX,
        *,
        prompt_ids: Sequence[int] | None = None,
    ) -> None:
        """``prompt``: the message texts, in order; or ``prompt_ids``: the prompt's token ids
        (from a server's ``/tokenize``), which replace ``prompt`` when given."""
        if not 1 <= min_n <= max_n:
            raise ConfigError(
                f"prompt_lookup_min..max must satisfy 1 <= min <= max, got {min_n}..{max_n}"
            )
        self._tok: SplitTokenizer = tokenizer or WordTokenizer()
        self._min, self._max = min_n, max_n
        # One dict per n-gram length: hashes of different lengths never meet (with a zero seed,
        # (0,) and (0, 0) would hash alike).
        self._index: list[dict[int, int]] = [{} for _ in range(max_n + 1)]
        self._pending = ""
        self._hits = 0
        self._n_out = 0
        ids: list[int] = [t & _MASK for t in prompt_ids] if prompt_ids is not None else []
        for i, text in enumerate(() if prompt_ids is not None else prompt):
            if i:
                ids.append(_MESSAGE_BREAK_ID)
            ids.extend(self._tok.encode(text))
        self._ids = ids
        self._index_prompt()

    @property
    def method(self) -> str:
        """``"tokenizer"`` or ``"words"``: which tokens the rate counts."""
        return self._tok.method

    def _index_prompt(self) -> None:
        """Index every prompt n-gram that has a follower, keeping its first occurrence."""
        import numpy as np  # the client already depends on it; kept out of import time

        ids, size = self._ids, len(self._ids)
        if size < 2:
            return
        arr = np.array(ids, dtype=np.uint64)
        h = np.zeros(size, dtype=np.uint64)
        base = np.uint64(_BASE)
        with np.errstate(over="ignore"):
            for n in range(1, min(self._max, size - 1) + 1):
                # h[s] = hash of ids[s:s+n]; valid for s + n <= size - 1 (a follower exists)
                h[: size - n] = h[: size - n] * base + arr[n - 1 : size - 1]
                if n >= self._min:
                    keys = h[: size - n].tolist()
                    keys.reverse()  # later occurrences first: the earliest is written last
                    self._index[n].update(zip(keys, range(size - 1, n - 1, -1), strict=False))

    def _judge(self, t: int) -> None:
        """Would the proposer have guessed ``t`` from the context before it? Then index it."""
        ids, index = self._ids, self._index
        p = len(ids)
        top = min(self._max, p)
        keys = [0] * (top + 1)
        h = 0
        mult = 1
        for n in range(1, top + 1):  # suffix hashes, shortest first
            h = (ids[p - n] * mult + h) & _MASK
            mult = (mult * _BASE) & _MASK
            keys[n] = h
        for n in range(top, self._min - 1, -1):  # longest n first
            at = index[n].get(keys[n])
            if at is not None:
                if ids[at] == t:
                    self._hits += 1
                break
        self._n_out += 1
        ids.append(t)
        for n in range(self._min, top + 1):
            index[n].setdefault(keys[n], p)

    def feed(self, delta: str) -> None:
        """One streamed content delta (any size, may cut a token in two)."""
        if not delta:
            return
        tokens, self._pending = self._tok.split(self._pending + delta)
        for t in tokens:
            self._judge(t)
        if len(self._pending) > _MAX_PENDING_CHARS:
            # One endless "word" (base64, a long run without spaces): cut it rather than
            # re-tokenize a growing tail on every chunk, which would be quadratic.
            cut = len(self._pending) - _KEEP_CHARS
            for t in self._tok.encode(self._pending[:cut]):
                self._judge(t)
            self._pending = self._pending[cut:]

    def feed_tokens(self, tokens: Iterable[int]) -> None:
        """Output token ids already split (from a server that returns them)."""
        for t in tokens:
            self._judge(t & _MASK)

    def finish(self) -> LookupResult:
        """Flush the held-back tail and return the totals; safe to call more than once."""
        if self._pending:
            for t in self._tok.encode(self._pending):
                self._judge(t)
            self._pending = ""
        return self.result()

    def result(self) -> LookupResult:
        """Totals so far (the held-back tail not yet judged)."""
        return LookupResult(
            output_tokens=self._n_out, matched_tokens=self._hits, method=self._tok.method
        )


def match_rate_of(
    context: Iterable[str],
    output: str,
    tokenizer: SplitTokenizer | None = None,
    min_n: int = DEFAULT_LOOKUP_MIN,
    max_n: int = DEFAULT_LOOKUP_MAX,
) -> LookupResult:
    """One-shot form: the lookup result of ``output`` given the ``context`` message texts."""
    m = LookupMatcher(context, tokenizer, min_n, max_n)
    m.feed(output)
    return m.finish()
