"""The example workloads specload ships: made by this code, seeded, nothing downloaded.

``mixed_traffic()`` is the prompt file behind ``scenarios/mixed-traffic.yaml``: four classes
of request whose drafting behaviour differs by content, in the specload prompt-file format
with a ``category`` and a ``max_tokens`` per line:

- ``code``: apply a small change to a code file and return it whole. The answer repeats the
  input, which is where n-gram (prompt lookup) drafting accepts many tokens.
- ``summary``: summarise a given text; the answer reuses some of its phrases.
- ``qa``: a short factual question with a one-sentence answer (short input, short output).
- ``writing``: open-ended writing from a one-line brief; nothing in the prompt to copy.

Words and code lines come from the synthetic prompt generator (``scenario/prompts.py``), so the
text is meaningless but has the statistics that matter here (length, self-repetition), and the
file has no licence attached to anyone's data. ``scripts/make_workloads.py`` writes the files;
a test checks the shipped file is what this code makes. Nothing in the installed package needs
this code: it makes committed files.
"""

from __future__ import annotations

import random
from typing import Any

from specload.core.pacer import derive_seed
from specload.scenario.words import code_pieces, prose_pieces

__all__ = ["CATEGORIES", "mixed_traffic", "sample_trace"]

#: category -> (output cap, how the prompt is made)
CATEGORIES = ("code", "summary", "qa", "writing")
_CAPS = {"code": 256, "summary": 96, "qa": 32, "writing": 256}


def _words(rng: random.Random, n: int) -> str:
    return "".join(p for p in prose_pieces(rng, n) if p not in (".", "\n")).strip()


def _prompt(category: str, rng: random.Random) -> str:
    if category == "code":
        body = "".join(code_pieces(rng, 0.7, 320))
        old, new = rng.sample(["value", "total", "count", "index", "offset", "result"], 2)
        return (
            f"Apply this change and return the whole file, unchanged otherwise: rename {old} "
            f"to {new}.\n\n{body}"
        )
    if category == "summary":
        return "Summarise this text in three sentences:\n\n" + "".join(prose_pieces(rng, 420))
    if category == "qa":
        return f"What is the {_words(rng, 2)} of the {_words(rng, 2)}? Answer in one sentence."
    return (
        f"Write an original short story about {_words(rng, 3)}, told in the first person, "
        "with a surprising ending."
    )


def mixed_traffic(seed: int = 0, per_category: int = 60) -> list[dict[str, Any]]:
    """``per_category`` prompts of each class, interleaved (so the first N of the file keep
    the mix), as prompt-file lines."""
    out = []
    for i in range(per_category):
        for category in CATEGORIES:
            rng = random.Random(derive_seed(seed, "mixed-traffic", category, i))
            out.append(
                {
                    "id": f"{category}-{i:03d}",
                    "category": category,
                    "max_tokens": _CAPS[category],
                    "messages": [{"role": "user", "content": _prompt(category, rng)}],
                }
            )
    return out


def sample_trace(seed: int = 0, count: int = 120, fmt: str = "specload") -> list[dict[str, Any]]:
    """A bursty request trace, about 2 req/s over a minute, for ``arrival: trace``.

    Arrivals come in bursts (gamma gaps, coefficient of variation 2); lengths are log-normal
    (prompts ~600 tokens, outputs ~150). ``mooncake``: times in ms and ``hash_ids`` (512-token
    blocks) where a third of requests continue an earlier request's conversation, so they
    share its leading blocks, as the Mooncake traces record.
    """
    rng = random.Random(derive_seed(seed, "sample-trace", fmt))
    t = 0.0
    out: list[dict[str, Any]] = []
    next_block = 0
    chains: list[list[int]] = []
    for _ in range(count):
        t += rng.gammavariate(0.25, 0.5 / 0.25)
        n_in = min(4000, max(32, int(rng.lognormvariate(6.3, 0.6))))
        n_out = min(1024, max(8, int(rng.lognormvariate(4.9, 0.5))))
        if fmt == "specload":
            out.append({"timestamp": round(t, 3), "input_tokens": n_in, "output_tokens": n_out})
            continue
        blocks = -(-n_in // 512)
        if chains and rng.random() < 1 / 3:
            chain = rng.choice(chains)
            ids = (chain + list(range(next_block, next_block + blocks)))[:blocks]
        else:
            ids = list(range(next_block, next_block + blocks))
        next_block += blocks
        chains.append(ids)
        out.append(
            {
                "timestamp": int(t * 1000),
                "input_length": n_in,
                "output_length": n_out,
                "hash_ids": ids,
            }
        )
    return out
