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
a test checks the shipped file is what this code makes.
"""

from __future__ import annotations

import random
from typing import Any

from specload.pacer import derive_seed
from specload.scenario.prompts import code_pieces, prose_pieces

__all__ = ["CATEGORIES", "mixed_traffic"]

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
