"""Prompt sets: deterministic synthetic prompts of exact token length, or a JSONL file.

``build_prompt_set(scenario, tokenize) -> PromptSet``. ``tokenize(text) -> int`` counts the
prompt tokens the server charges for a chat request whose single user message is ``text``
(chat template included); ``server_tokenizer(base_url, model, api_key)`` makes one from the
server's ``/tokenize`` and returns None when the server has none. Without it, counts are an
estimate (one token per word or punctuation mark, no template), and
``PromptSet.token_count_source`` says ``"estimate"`` instead of ``"tokenize"``; the run
records which (``run.json: token_count_source``).

Synthetic prompt ``i`` is ``shared prefix + instruction + body``, built from common English
words (one token each in the usual BPE vocabularies), with a RNG seeded by
``(scenario.seed, i)``: the same scenario gives the same prompts in every run and every
process. Length fitting adds or drops words until ``tokenize`` returns exactly
``input_tokens`` (a few ``/tokenize`` calls per prompt); ``Prompt.expected_prompt_tokens``
is the count the server reported (or the estimate).

- ``shared_prefix_tokens``: the first that many content tokens are identical in every
  prompt (a long system-like block), so a server with prefix caching can skip their prefill.
- ``repetition`` r in [0, 1]: the body is code-like lines, each a copy of an earlier line with
  probability r, and the instruction asks the model to reproduce them. The continuation then
  repeats the input: where n-gram / suffix drafting accepts many tokens. r = 0 gives prose
  with no repeated lines (topic-hopping traffic, low acceptance).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from specload.core.errors import ConfigError
from specload.core.pacer import derive_seed
from specload.core.retry import with_retries
from specload.scenario.schema import Scenario
from specload.scenario.words import code_pieces, prose_pieces

__all__ = [
    "Prompt",
    "PromptSet",
    "TokenizeFailed",
    "build_prompt_set",
    "estimate_tokens",
    "server_tokenizer",
]

Tokenize = Callable[[str], int]

_TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]")
_FIT_ROUNDS = 12
_TOKENIZE_WORKERS = 8  # concurrent /tokenize calls while building a prompt set


class TokenizeFailed(Exception):
    """The server's ``/tokenize`` kept failing after its retries while a prompt set was built
    (the probe had worked): the caller decides between the estimate and failing the run."""


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: one per word and per punctuation mark."""
    return len(_TOKEN_RE.findall(text))


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: its index in the set, chat messages, and its token count if known; from a
    prompt file also its class (``category``), its own output cap and its id."""

    index: int
    messages: tuple[dict[str, Any], ...]
    expected_prompt_tokens: int | None
    category: str | None = None
    max_tokens: int | None = None
    id: str | None = None
    #: a trace's request: its time in the trace (seconds after the first request)
    at_s: float | None = None

    def wire(self) -> list[Any]:
        """Messages and counted tokens, then category, output cap, id and trace time when
        any is set (synthetic sets keep the two-item form, and so their hash)."""
        out: list[Any] = [list(self.messages), self.expected_prompt_tokens]
        extra = [self.category, self.max_tokens, self.id, self.at_s]
        return out + extra if any(x is not None for x in extra) else out


class PromptSet:
    """An indexed, immutable list of prompts; ``cycle(n)`` wraps around for request ``n``."""

    def __init__(
        self,
        prompts: Sequence[Prompt],
        *,
        token_count_source: str,
        input_tokens: int | None = None,
        shared_prefix_tokens: int = 0,
        repetition: float = 0.0,
        source_format: str = "synthetic",
        targets: Sequence[int] | None = None,
    ) -> None:
        if not prompts:
            raise ValueError("a prompt set needs at least one prompt")
        self._prompts = tuple(prompts)
        self.token_count_source = token_count_source  # "tokenize" | "estimate"
        self.input_tokens = input_tokens  # target per prompt; None for file prompts
        self.shared_prefix_tokens = shared_prefix_tokens
        self.repetition = repetition
        #: ``synthetic``, or the prompt file's format (``scenario/prompt_files.py``)
        self.source_format = source_format
        #: per-prompt target lengths when ``input_tokens`` is a distribution (master side)
        self.targets = tuple(targets) if targets is not None else None

    def __len__(self) -> int:
        return len(self._prompts)

    def __getitem__(self, i: int) -> Prompt:
        return self._prompts[i]

    def __iter__(self) -> Iterator[Prompt]:
        return iter(self._prompts)

    def cycle(self, n: int) -> Prompt:
        """The prompt for the ``n``-th request: the set in order, then again from the start."""
        return self._prompts[n % len(self._prompts)]

    @cached_property
    def sha256(self) -> str:
        """The set's identity: a hash of every prompt's messages and counted tokens, in order.

        Every load process sends the prompts the master built, and run.json records this, so
        two runs that claim the same traffic can be checked to have sent the same prompts.
        """
        canon = [p.wire() for p in self._prompts]
        blob = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def to_wire(self) -> dict[str, Any]:
        """The set as msgpack-able data, for the master's ``RunStart`` to the workers."""
        return {
            "token_count_source": self.token_count_source,
            "input_tokens": self.input_tokens,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "repetition": self.repetition,
            "source_format": self.source_format,
            "prompts": [p.wire() for p in self._prompts],
            "sha256": self.sha256,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> PromptSet:
        """Inverse of ``to_wire``; ``ValueError`` when the prompts do not match their hash
        (a truncated or altered message must not become a run of other traffic)."""
        prompts = [
            Prompt(
                i,
                tuple(dict(m) for m in item[0]),
                None if item[1] is None else int(item[1]),
                *item[2:6],
            )
            for i, item in enumerate(data["prompts"])
        ]
        out = cls(
            prompts,
            token_count_source=str(data["token_count_source"]),
            input_tokens=data.get("input_tokens"),
            shared_prefix_tokens=int(data.get("shared_prefix_tokens") or 0),
            repetition=float(data.get("repetition") or 0.0),
            source_format=str(data.get("source_format") or "synthetic"),
        )
        if out.sha256 != data.get("sha256"):
            raise ValueError(
                f"the prompt set received does not match its hash ({out.sha256[:12]} != "
                f"{str(data.get('sha256'))[:12]})"
            )
        return out

    @property
    def exact(self) -> bool:
        """True when every prompt has exactly ``input_tokens`` tokens as the server counts."""
        if self.token_count_source != "tokenize":
            return False
        if self.targets is not None:
            return all(
                p.expected_prompt_tokens == t for p, t in zip(self, self.targets, strict=True)
            )
        return self.input_tokens is not None and all(
            p.expected_prompt_tokens == self.input_tokens for p in self._prompts
        )


def build_prompt_set(scenario: Scenario, tokenize: Tokenize | None = None) -> PromptSet:
    """The scenario's prompts; exact lengths when ``tokenize`` is given, else estimated."""
    spec = scenario.prompts
    if spec.kind == "file":
        return _file_prompts(scenario, tokenize)
    if spec.kind == "trace":
        return _trace_prompts(scenario, tokenize)
    count_fn = tokenize if tokenize is not None else estimate_tokens
    overhead = count_fn("")
    where = scenario.source or "<scenario>"
    dist = spec.input_dist
    targets = [
        dist.draw(scenario.seed, "input", i) if dist is not None else spec.input_tokens
        for i in range(spec.count)
    ]
    if min(targets) <= overhead + spec.shared_prefix_tokens:
        raise ConfigError(
            f"{min(targets)} leaves no room after the chat template "
            f"({overhead}) and the shared prefix ({spec.shared_prefix_tokens}) "
            "(expected a larger value)",
            file=where,
            path="prompts.synthetic.input_tokens",
        )
    prefix = ""
    if spec.shared_prefix_tokens:
        pieces = prose_pieces(
            random.Random(derive_seed(scenario.seed, "prefix")), spec.shared_prefix_tokens * 2 + 16
        )
        prefix, _ = _fit("", pieces, overhead + spec.shared_prefix_tokens, count_fn)
        prefix += "\n\n"

    def make(i: int) -> Prompt:
        rng = random.Random(derive_seed(scenario.seed, "prompt", i))
        head = prefix + _instruction(spec.repetition, rng)
        budget = targets[i] * 2 + 32
        pieces = (
            code_pieces(rng, spec.repetition, budget)
            if spec.repetition > 0
            else prose_pieces(rng, budget)
        )
        text, n_tokens = _fit(head, pieces, targets[i], count_fn)
        msg = ({"role": "user", "content": text},)
        return Prompt(i, msg, n_tokens, max_tokens=_output_cap(scenario, i))

    if tokenize is None:
        prompts = [make(i) for i in range(spec.count)]
    else:
        # a few /tokenize round trips per prompt: overlap them (each prompt has its own RNG,
        # so the set is the same whatever the order; threads are greenlets under Locust)
        with ThreadPoolExecutor(max_workers=min(_TOKENIZE_WORKERS, spec.count)) as pool:
            prompts = list(pool.map(make, range(spec.count)))
    return PromptSet(
        prompts,
        token_count_source="tokenize" if tokenize else "estimate",
        input_tokens=spec.input_tokens if dist is None else None,
        shared_prefix_tokens=spec.shared_prefix_tokens,
        repetition=spec.repetition,
        targets=targets if dist is not None else None,
    )


def _trace_prompts(scenario: Scenario, tokenize: Tokenize | None) -> PromptSet:
    """One prompt per trace request, in time order: its messages, or synthetic text of its
    length; with Mooncake hash ids, text built from one seeded block per id, so requests that
    shared blocks in the trace share that prefix here. Each prompt's output cap is the
    request's output length (``min_tokens`` follows it)."""
    from specload.scenario.trace import MOONCAKE_BLOCK, read_trace

    assert scenario.trace is not None
    trace = read_trace(scenario.trace)
    count_fn = tokenize if tokenize is not None else estimate_tokens
    blocks: dict[int, list[str]] = {}

    def block(h: int) -> list[str]:
        if h not in blocks:
            rng = random.Random(derive_seed(scenario.seed, "trace-block", h))
            blocks[h] = prose_pieces(rng, MOONCAKE_BLOCK)
        return blocks[h]

    def make(i: int) -> Prompt:
        e = trace.entries[i]
        if e.messages is not None:
            single = len(e.messages) == 1 and isinstance(e.messages[0].get("content"), str)
            n = tokenize(e.messages[0]["content"]) if (tokenize and single) else None
            return Prompt(i, e.messages, n, e.category, e.output_tokens, None, e.at_s)
        rng = random.Random(derive_seed(scenario.seed, "trace", i))
        pieces = [p for h in e.hash_ids for p in block(h)]
        pieces += prose_pieces(rng, e.input_tokens * 2 + 32)
        text, n = _fit("", pieces, e.input_tokens, count_fn)
        msg = ({"role": "user", "content": text},)
        return Prompt(i, msg, n, e.category, e.output_tokens, None, e.at_s)

    for h in {h for e in trace.entries for h in e.hash_ids}:
        block(h)  # built once, before any thread: equal ids are equal text
    if tokenize is None:
        prompts = [make(i) for i in range(len(trace.entries))]
    else:
        with ThreadPoolExecutor(max_workers=_TOKENIZE_WORKERS) as pool:
            prompts = list(pool.map(make, range(len(trace.entries))))
    return PromptSet(
        prompts,
        token_count_source="tokenize" if tokenize else "estimate",
        source_format=f"trace-{trace.format}",
    )


def _output_cap(scenario: Scenario, i: int, own: int | None = None) -> int | None:
    """Prompt ``i``'s output cap: its own (a prompt file line's), else a draw from
    ``max_tokens`` when that is a distribution, else None (the scenario's ``max_tokens``)."""
    dist = scenario.max_tokens_dist
    if own is not None or dist is None:
        return own
    return dist.draw(scenario.seed, "output", i)


def _instruction(repetition: float, rng: random.Random) -> str:
    if repetition > 0:
        return "Reproduce the following code exactly, line by line, then continue it:\n"
    return (
        rng.choice(
            (
                "Continue the following text:",
                "Summarize the following notes:",
                "Answer in detail, using these notes:",
            )
        )
        + "\n"
    )


def _fit(head: str, pieces: list[str], target: int, count: Tokenize) -> tuple[str, int]:
    """``head`` + the shortest run of ``pieces`` (+ filler words) counting exactly ``target``.

    Steps the piece count by the remaining gap (pieces are ~1 token), then closes a last gap
    with one-token filler words. Returns the text and its final count (== target unless the
    tokenizer makes it unreachable; the count is the truth either way).
    """
    n = max(0, min(len(pieces), target - count(head)))
    best: tuple[str, int] | None = None
    for _ in range(_FIT_ROUNDS):
        text = head + "".join(pieces[:n])
        c = count(text)
        if c == target:
            return text, c
        if c < target and (best is None or c > best[1]):
            best = (text, c)
        nxt = max(0, min(len(pieces), n + target - c))
        if nxt == n:
            break
        n = nxt
    text, c = best if best is not None else (head, count(head))
    for word in _filler():
        if c >= target:
            break
        cand = text + word
        cc = count(cand)
        if cc <= target:
            text, c = cand, cc
    return text, c


def _filler() -> list[str]:
    return [" " + w for w in ("the", "of", "and", "to", "in", "is", "that", "for") * 64]


def _file_prompts(scenario: Scenario, tokenize: Tokenize | None) -> PromptSet:
    """Prompts from a prompt file (``scenario/prompt_files.py``: its format is detected)."""
    from specload.scenario.prompt_files import read_prompt_file

    spec = scenario.prompts
    assert spec.file is not None
    entries, fmt = read_prompt_file(spec.file, spec.count)
    prompts: list[Prompt] = []
    for e in entries:
        single = len(e.messages) == 1 and isinstance(e.messages[0].get("content"), str)
        n = tokenize(e.messages[0]["content"]) if (tokenize and single) else None
        i = len(prompts)
        cap = _output_cap(scenario, i, e.max_tokens)
        prompts.append(Prompt(i, e.messages, n, e.category, cap, e.id))
    return PromptSet(
        prompts, token_count_source="tokenize" if tokenize else "estimate", source_format=fmt
    )


def server_tokenizer(
    base_url: str, model: str | None = None, api_key: str | None = None, *, timeout_s: float = 10.0
) -> Tokenize | None:
    """A counter backed by the server's ``/tokenize``, or None when it has none.

    Tries vLLM's chat form (``messages`` + ``add_generation_prompt``: the count includes the
    chat template, i.e. what ``usage.prompt_tokens`` will say), then the plain ``prompt``
    form. Any failure of the probe (404, refused, non-JSON) means "no tokenizer". Transient
    failures (reset, timeout, 5xx, 429) are retried with backoff, the probe's and every
    count's.
    """
    url = base_url.rstrip("/").removesuffix("/v1") + "/tokenize"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    base: dict[str, Any] = {"model": model} if model else {}

    def post_once(payload: dict[str, Any]) -> int:
        req = urllib.request.Request(
            url, data=json.dumps({**base, **payload}).encode(), headers=headers, method="POST"
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return int(json.loads(resp.read())["count"])

    def post(payload: dict[str, Any]) -> int:
        # a reset, a timeout, a 5xx or a 429 is tried again (specload/core/retry.py): one hiccup
        # of a busy server must not fail the preparation of a run
        return with_retries(lambda: post_once(payload))

    def chat(text: str) -> int:
        return post(
            {"messages": [{"role": "user", "content": text}], "add_generation_prompt": True}
        )

    def plain(text: str) -> int:
        return post({"prompt": text})

    for fn in (chat, plain):
        try:
            fn("probe")
        except _FAILURES:
            continue
        return _failing_as(fn, url)
    return None


_FAILURES = (
    urllib.error.URLError,
    http.client.HTTPException,
    OSError,
    ValueError,
    KeyError,
    TypeError,
)


def _failing_as(fn: Tokenize, url: str) -> Tokenize:
    """``fn`` whose failures (after its retries) are ``TokenizeFailed``, saying why."""

    def count(text: str) -> int:
        try:
            return fn(text)
        except _FAILURES as exc:
            raise TokenizeFailed(f"POST {url}: {_why(exc)}") from exc

    return count


def _why(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return _why(exc.reason)
    return str(exc) or type(exc).__name__
