"""Speculative decoding as the simulator models it: vLLM's ``--speculative-config`` JSON,
per-position acceptance, n-gram prompt lookup, and the batch-size schedule (dynamic speculation).

Acceptance for model-based drafting (``draft_model``, ``eagle``, ``mtp``, ...) is synthetic, as
vLLM's ``rejection_sample_method: synthetic``: ``synthetic_acceptance_rates[i]`` is the
*unconditional* probability that draft position ``i`` is accepted (so mean acceptance length is
``1 + sum(rates)``); one uniform draw per request per step decides how many leading drafts
survive. ``synthetic_acceptance_length`` L instead sets geometric rates ``a**(i+1)`` with
``sum == L - 1``. For ``ngram`` (and ``suffix``, modelled alike) nothing is synthetic: the
proposer really looks up the last n tokens (``prompt_lookup_max`` down to
``prompt_lookup_min``, vLLM's default 5 and 5) in the prompt+output stream and drafts what
followed their latest earlier occurrence; drafts are accepted while they equal the true next
tokens.

``num_speculative_tokens_per_batch_size: [[start, end, k], ...]`` chooses k for each step from
the number of running requests (inclusive ranges from 1; as in vLLM 0.26, a batch in a gap or
past the last range keeps the k of the last range below it, and k is clamped to
``num_speculative_tokens``).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOOKUP_METHODS", "MODEL_METHODS", "NgramIndex", "SpecConfig", "parse_spec_config"]

MODEL_METHODS = (
    "draft_model",
    "eagle",
    "eagle3",
    "mtp",
    "deepseek_mtp",
    "medusa",
    "mlp_speculator",
)
#: Model-free methods: drafts come from really matching the request's token stream.
LOOKUP_METHODS = ("ngram", "suffix")
_DEFAULT_RATES = (0.8, 0.55, 0.3, 0.15)


@dataclass(frozen=True)
class SpecConfig:
    """A validated speculative config; ``raw`` is the JSON object as given."""

    method: str
    k: int
    rates: tuple[float, ...]
    lookup_min: int = 1
    lookup_max: int = 4
    schedule: tuple[tuple[int, int, int], ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def is_ngram(self) -> bool:
        """Model-free drafting by prompt lookup (``ngram``; ``suffix`` is modelled the same)."""
        return self.method in LOOKUP_METHODS

    @property
    def max_k(self) -> int:
        """The most tokens any step drafts: schedule entries are clamped to ``k``."""
        return self.k

    def k_for_batch(self, running: int) -> int:
        """Drafted tokens per request this step, for ``running`` requests in the batch."""
        if not self.schedule:
            return self.k
        # vLLM 0.26's dense lookup: the covering range's k, else the last range that starts
        # below the batch (gaps and batches past the last range keep it), clamped to k.
        chosen = 0
        for start, end, k in self.schedule:
            if start > running:
                break
            chosen = k
            if running <= end:
                break
        return min(chosen, self.k)

    def accepted(self, rng: random.Random, k: int) -> int:
        """How many of ``k`` synthetic drafts are accepted (leading run), one draw."""
        u = rng.random()
        n = 0
        rates = self.rates
        while n < k and n < len(rates) and u < rates[n]:
            n += 1
        return n


def _fail(msg: str) -> ValueError:
    return ValueError(f"--speculative-config: {msg}")


def _rates(obj: dict[str, Any], k: int) -> tuple[float, ...]:
    if "synthetic_acceptance_rates" in obj:
        rates = obj["synthetic_acceptance_rates"]
        if not isinstance(rates, list) or not all(
            isinstance(r, (int, float)) and 0 <= r <= 1 for r in rates
        ):
            raise _fail("synthetic_acceptance_rates must be a list of numbers in [0, 1]")
        if any(b > a for a, b in itertools.pairwise(rates)):
            raise _fail("synthetic_acceptance_rates must not increase with position")
        return tuple(float(r) for r in rates) + (0.0,) * max(0, k - len(rates))
    if "synthetic_acceptance_length" in obj:
        length = obj["synthetic_acceptance_length"]
        if not isinstance(length, (int, float)) or not 1 <= length <= k + 1:
            raise _fail(f"synthetic_acceptance_length must be a number in [1, {k + 1}]")
        return _geometric_rates(float(length) - 1.0, k)
    return (_DEFAULT_RATES + (0.1,) * k)[:k]


def _geometric_rates(target: float, k: int) -> tuple[float, ...]:
    """Rates a, a^2, ..., a^k whose sum is ``target`` (bisection on a)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        if sum(a ** (i + 1) for i in range(k)) < target:
            lo = a
        else:
            hi = a
    return tuple(lo ** (i + 1) for i in range(k))


def _schedule(obj: dict[str, Any]) -> tuple[tuple[int, int, int], ...]:
    sched = obj.get("num_speculative_tokens_per_batch_size")
    if sched is None:
        return ()
    key = "num_speculative_tokens_per_batch_size"
    if not isinstance(sched, list) or not sched:
        raise _fail(f"{key} must be a non-empty list of [start, end, k]")
    for i, item in enumerate(sched):
        if not (
            isinstance(item, list) and len(item) == 3 and all(isinstance(v, int) for v in item)
        ):
            raise _fail(f"{key}[{i}] must be [start, end, k] integers")
    out = sorted((int(a), int(b), int(c)) for a, b, c in sched)  # vLLM sorts them too
    prev_end = 0
    for i, (start, end, k) in enumerate(out):
        if i == 0 and start != 1:
            raise _fail(f"{key}: the first range must start at 1")
        if start <= prev_end or end < start or k < 0:
            raise _fail(f"{key}: ranges must not overlap, need end >= start >= 1 and k >= 0")
        prev_end = end
    return tuple(out)


def parse_spec_config(text: str | dict[str, Any] | None) -> SpecConfig | None:
    """Parse vLLM's ``--speculative-config`` JSON; ``ValueError`` names the bad key."""
    if text is None or text == "":
        return None
    if isinstance(text, str):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail(f"not valid JSON ({exc.msg})") from None
    else:
        obj = dict(text)
    if not isinstance(obj, dict):
        raise _fail("must be a JSON object")
    method = obj.get("method") or ("draft_model" if obj.get("model") else None)
    if method not in (*MODEL_METHODS, *LOOKUP_METHODS):
        raise _fail(f"method must be one of {', '.join((*LOOKUP_METHODS, *MODEL_METHODS))}")
    k = obj.get("num_speculative_tokens")
    if not isinstance(k, int) or k < 1:
        raise _fail("num_speculative_tokens must be an integer >= 1")
    # vLLM's defaults: both 5; one given sets the other.
    lmin = obj.get("prompt_lookup_min", obj.get("prompt_lookup_max", 5))
    lmax = obj.get("prompt_lookup_max", lmin)
    if not (isinstance(lmin, int) and isinstance(lmax, int) and 1 <= lmin <= lmax):
        raise _fail("prompt_lookup_min/max must be integers with 1 <= min <= max")
    sched = _schedule(obj)
    kmax = max([k, *(r[2] for r in sched)])
    return SpecConfig(
        method=method,
        k=k,
        rates=_rates(obj, kmax),
        lookup_min=lmin,
        lookup_max=lmax,
        schedule=sched,
        raw=obj,
    )


class NgramIndex:
    """Prompt-lookup over one request's prompt+output stream (vLLM's ``ngram`` method).

    Keeps, per n in [min, max], the latest start position of every n-gram, updated as tokens
    are appended, so a proposal costs O(max - min) dictionary look-ups.
    """

    __slots__ = ("_maps", "_nmax", "_nmin", "_stream")

    def __init__(self, prompt: list[str], nmin: int, nmax: int) -> None:
        self._stream: list[str] = []
        self._nmin, self._nmax = nmin, nmax
        self._maps: dict[int, dict[tuple[str, ...], int]] = {n: {} for n in range(nmin, nmax + 1)}
        self.extend(prompt)

    def extend(self, tokens: list[str]) -> None:
        """Append tokens; index every n-gram that now ends before the stream's last token."""
        s = self._stream
        for tok in tokens:
            s.append(tok)
            end = len(s) - 1  # n-grams ending just before ``end`` have a continuation
            for n, m in self._maps.items():
                if end - n >= 0:
                    m[tuple(s[end - n : end])] = end - n

    def propose(self, k: int) -> list[str]:
        """Up to ``k`` drafted tokens continuing the longest matching suffix n-gram."""
        s = self._stream
        for n in range(self._nmax, self._nmin - 1, -1):
            if len(s) < n:
                continue
            pos = self._maps[n].get(tuple(s[len(s) - n :]))
            if pos is not None:
                start = pos + n
                return s[start : start + k]
        return []
