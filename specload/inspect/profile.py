"""Will drafting or prefix caching help this traffic? A repetition profile, before paying for it.

``specload inspect`` reads a prompt set (JSONL of ``{"messages": [...]}``) or a baseline run
directory and answers with figures:

- **Lookup match rate** (would n-gram / suffix drafting help?): per request, the share of output
  tokens that vLLM's prompt-lookup proposer could have guessed from the context before them
  (``client/lookup.py``). From a run dir it is the recorded ``lookup_match_rate`` of real
  outputs. From a prompt set it is computed on the last assistant message when the set holds
  conversations with replies; otherwise only the prompts' self-repetition can be measured,
  a weak proxy, and the report says so.
- **Shared prefixes** (would prefix caching help?): each prompt's longest prefix shared with
  another prompt, groups of prompts sharing one, and the share of prompt tokens that fall in
  16-token blocks an earlier request already filled (vLLM's automatic prefix caching hashes
  full blocks: an upper bound with an unbounded cache).

Then one plain recommendation (``ngram``, ``ngram_maybe``, ``prefix_caching``, both, or
``neither``) with the figures and thresholds that justify it. This module reads the sources; the figures and thresholds are
``repetition.py``; ``cli/inspect.py`` renders the result.

A prompt file or run with categories (a prompt file's ``category``) is also profiled per
category (``RepetitionProfile.categories``): code edits that repeat their input and open
questions that do not average into a figure neither class has.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from specload.client.lookup import SplitTokenizer, WordTokenizer
from specload.core.errors import ConfigError
from specload.inspect.repetition import (
    BLOCK_TOKENS,
    Distribution,
    PrefixGroup,
    PrefixProfile,
    Recommendation,
    distribution,
    lookup_rate,
    prefix_profile,
    prompt_tokens,
    recommend,
)

__all__ = [
    "CategoryProfile",
    "RepetitionProfile",
    "inspect_path",
    "inspect_prompts",
    "inspect_run",
    "read_prompt_set",
]


@dataclass(frozen=True, slots=True)
class CategoryProfile:
    """One category's figures and its own recommendation (same thresholds as the whole)."""

    name: str
    requests: int
    lookup: Distribution | None
    cacheable_share: float | None
    recommendation: Recommendation


@dataclass
class RepetitionProfile:
    """Everything ``specload inspect`` reports; ``to_dict`` is the ``--json`` output."""

    source: str
    kind: str  # "prompts" | "run"
    requests: int
    lookup_method: str | None
    lookup_basis: str
    lookup: Distribution | None
    prefix: PrefixProfile | None
    recommendations: list[Recommendation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: per category, when the prompts carry two or more (else empty)
    categories: list[CategoryProfile] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_prompt_set(path: Path) -> list[list[dict[str, Any]]]:
    """The ``messages`` of each line of a prompt JSONL file; ConfigError names the bad line."""
    out: list[list[dict[str, Any]]] = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror})", file=str(path)) from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ConfigError(
                'not JSON (expected one {"messages": [...]} object per line)',
                file=str(path),
                path=f"line {n}",
            ) from None
        msgs = obj.get("messages") if isinstance(obj, dict) else None
        if (
            not isinstance(msgs, list)
            or not msgs
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs)
        ):
            raise ConfigError(
                "expected a non-empty list of {role, content} objects",
                file=str(path),
                path=f"line {n}: messages",
            )
        out.append(msgs)
    if not out:
        raise ConfigError(
            'no prompts in the file (expected JSONL of {"messages": [...]})', file=str(path)
        )
    return out


def read_categories(path: Path) -> list[str | None]:
    """Each prompt's ``category`` (None without one), in the order of ``read_prompt_set``
    (which has checked the file)."""
    out: list[str | None] = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            obj = orjson.loads(line)
            cat = obj.get("category") if isinstance(obj, dict) else None
            out.append(str(cat) if cat is not None else None)
    return out


def by_category(
    categories: list[str | None],
    rates: list[float | None],
    prompts: list[list[int]] | None,
    basis: str,
) -> list[CategoryProfile]:
    """Per category (two or more): its lookup rates, its prompts' reusable prefix share
    (``prompts`` None: unknown) and its own recommendation."""
    names = sorted({c for c in categories if c is not None})
    if len(names) < 2:
        return []
    out = []
    for name in names:
        idx = [i for i, c in enumerate(categories) if c == name]
        lookup = distribution(r for i in idx if (r := rates[i]) is not None)
        prefix = prefix_profile([prompts[i] for i in idx], basis) if prompts else None
        rec = recommend(lookup, basis, prefix)[0]
        share = prefix.cacheable_share if prefix else None
        out.append(CategoryProfile(name, len(idx), lookup, share, rec))
    return out


def inspect_prompts(path: Path, tokenizer: SplitTokenizer | None = None) -> RepetitionProfile:
    """Profile a prompt set: lookup rate (replies or self-repetition) and shared prefixes,
    overall and per category."""
    sets = read_prompt_set(path)
    per_prompt: list[float | None] = []
    replies = 0
    for msgs in sets:
        rate, from_reply = lookup_rate(msgs, tokenizer)
        replies += from_reply
        per_prompt.append(rate)
    rates = [r for r in per_prompt if r is not None]
    notes: list[str] = []
    if replies == len(sets):
        basis = "last assistant reply vs. the conversation before it"
        prompts = [prompt_tokens(m[:-1], tokenizer) for m in sets]
    else:
        basis = "prompt self-repetition (no replies in the set: a weak proxy)"
        prompts = [prompt_tokens(m, tokenizer) for m in sets]
        notes.append(
            "The prompt set has no assistant replies, so the lookup figure only says how much the "
            "prompts repeat themselves. For the real figure, run a baseline and inspect its run "
            "dir: every record carries the lookup_match_rate of the actual output."
        )
    lookup = distribution(rates)
    prefix = prefix_profile(prompts, "prompt text")
    return RepetitionProfile(
        source=str(path),
        kind="prompts",
        requests=len(sets),
        lookup_method=(tokenizer or WordTokenizer()).method,
        lookup_basis=basis,
        lookup=lookup,
        prefix=prefix,
        recommendations=recommend(lookup, basis, prefix),
        notes=notes,
        categories=by_category(read_categories(path), per_prompt, prompts, basis),
    )


def _prompt_spec(scenario: dict[str, Any]) -> dict[str, Any]:
    """The scenario's prompt spec as ``{"kind", ...}`` from either run.json shape:
    ``{"synthetic": {...}}`` / ``{"file": PATH, "count": N}`` (the YAML form) or flat."""
    spec = scenario.get("prompts") or {}
    if not isinstance(spec, dict):
        return {}
    if isinstance(spec.get("synthetic"), dict):
        return {"kind": "synthetic", **spec["synthetic"]}
    if isinstance(spec.get("file"), str) and "kind" not in spec:
        return {"kind": "file", **spec}
    return spec


def _run_prefix(
    records: list[dict[str, Any]], scenario: dict[str, Any], notes: list[str]
) -> PrefixProfile | None:
    """Prefix figures from what the run kept: stored text, the prompt file, cache counts, hashes."""
    texts = [r["prompt_text"] for r in records if isinstance(r.get("prompt_text"), str)]
    if texts and len(texts) == len(records):
        return prefix_profile(
            [WordTokenizer().encode(t) for t in texts], "stored prompt text (--store-text)"
        )
    spec = _prompt_spec(scenario)
    file = spec.get("file")
    if spec.get("kind") == "file" and file and Path(file).is_file():
        sets = read_prompt_set(Path(file))
        idx = [i for r in records if isinstance(i := r.get("prompt_index"), int)]
        if len(idx) == len(records) and all(0 <= i < len(sets) for i in idx):
            return prefix_profile(
                [prompt_tokens(sets[i]) for i in idx], f"prompt file {file}, in the order sent"
            )
    prompt = sum(r.get("prompt_tokens") or 0 for r in records)
    cached = sum(r.get("cached_tokens") or 0 for r in records)
    if prompt and cached:
        return PrefixProfile(
            "server-reported cached_tokens", prompt, cached / prompt, None, 0, (), 0
        )
    if spec.get("kind") == "synthetic" and spec.get("input_tokens"):
        shared = int(spec.get("shared_prefix_tokens") or 0)
        share = (shared // BLOCK_TOKENS * BLOCK_TOKENS) / float(spec["input_tokens"])
        n = len(records)
        groups = (PrefixGroup(shared, n),) if shared >= BLOCK_TOKENS and n > 1 else ()
        return PrefixProfile(
            f"synthetic scenario: every prompt starts with the same {shared} tokens",
            prompt,
            share * (n - 1) / n if n else None,
            None,
            n if groups else 0,
            groups,
            0,
        )
    hashes = [r.get("prompt_sha256") for r in records if r.get("prompt_sha256")]
    if hashes:
        repeats = len(hashes) - len(set(hashes))
        notes.append(
            f"Prefix figures unavailable (no stored text or prompt file): {repeats} of "
            f"{len(hashes)} requests repeat an earlier prompt exactly."
        )
        return PrefixProfile(
            "prompt hashes (exact repeats only)", prompt, None, None, 0, (), repeats
        )
    notes.append(
        "Prefix figures unavailable: the run kept no prompt text, file, cache counts or hashes."
    )
    return None


def inspect_run(path: Path) -> RepetitionProfile:
    """Profile a baseline run dir: recorded lookup match rates and what it kept of prompts."""
    from specload.recorder.rundir import read_run

    run = read_run(path)
    # In send order: prefix caching depends on which request came first.
    records = sorted(
        (r for r in run.record_dicts() if r.get("ok")), key=lambda r: r.get("sent_at") or 0.0
    )
    if not records:
        raise ConfigError("no successful requests in requests.jsonl to profile", file=str(path))
    notes = list(run.warnings)
    rates = [
        float(r["lookup_match_rate"]) for r in records if r.get("lookup_match_rate") is not None
    ]
    if not rates:
        notes.append(
            "Records carry no lookup_match_rate (written by a specload that did not record it)."
        )
    method = run.meta.lookup_method
    basis = f"recorded outputs ({method or 'unknown'} tokens)"
    lookup = distribution(rates)
    prefix = _run_prefix(records, run.meta.scenario, notes)
    categories = [str(c) if (c := r.get("category")) is not None else None for r in records]
    per_record = [
        float(x) if (x := r.get("lookup_match_rate")) is not None else None for r in records
    ]
    return RepetitionProfile(
        source=str(path),
        kind="run",
        requests=len(records),
        lookup_method=method,
        lookup_basis=basis,
        lookup=lookup,
        prefix=prefix,
        recommendations=recommend(lookup, basis, prefix),
        notes=notes,
        categories=by_category(categories, per_record, None, basis),
    )


def inspect_path(path: str | Path, tokenizer: SplitTokenizer | None = None) -> RepetitionProfile:
    """A run dir (holds ``run.json``) or a prompt JSONL file; ConfigError for anything else."""
    p = Path(path)
    if p.is_dir():
        if not (p / "run.json").exists():
            raise ConfigError(
                "a folder without run.json (expected a run dir or a prompts .jsonl file)",
                file=str(p),
            )
        return inspect_run(p)
    if not p.is_file():
        raise ConfigError(
            "no such file or folder (expected a run dir or a prompts .jsonl file)", file=str(p)
        )
    return inspect_prompts(p, tokenizer)
