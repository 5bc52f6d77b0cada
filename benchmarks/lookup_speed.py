"""How much does on-the-fly prompt-lookup matching cost the client, per output token?

``LookupMatcher.feed`` runs for every streamed content chunk, inside the gevent loop that also
timestamps chunks, so its cost adds directly to client overhead. This benchmark streams
synthetic responses through it the way a server does (one token per chunk, and eight tokens
per chunk as under speculative decoding), with a long prompt to show the cost does not grow
with context, for both tokenizers (word approximation and a real byte-level BPE trained here,
in memory, so no download is needed). Figures: µs per output token, the minimum over repeats
(the machine's noise only ever adds time) and the median; the 1-minute load average is kept.

Run: ``.venv/bin/python benchmarks/lookup_speed.py`` → ``benchmarks/results/lookup_speed.json``.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specload.client.lookup import LookupMatcher, SplitTokenizer, load_tokenizer

OUT = Path(__file__).resolve().parent / "results" / "lookup_speed.json"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "river",
    "stone",
    "cloud",
    "amber",
    "violet",
    "copper",
    "silver",
    "harbor",
]


def _text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n_words))


def _bpe(tmp: Path) -> SplitTokenizer:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([_text(200, s) for s in range(50)], trainer)
    path = tmp / "tokenizer.json"
    tok.save(str(path))
    return load_tokenizer(path)


def _chunks(tokenizer: SplitTokenizer, text: str, per_chunk: int) -> list[str]:
    """Split ``text`` into stream deltas of ``per_chunk`` word-tokens each."""
    words = re.findall(r"\s*\w+|\s*[^\w\s]|\s+", text)
    return ["".join(words[i : i + per_chunk]) for i in range(0, len(words), per_chunk)]


def _case(
    tokenizer: SplitTokenizer, prompt: str, output: str, per_chunk: int, repeats: int
) -> dict:
    chunks = _chunks(tokenizer, output, per_chunk)
    per_token_us: list[float] = []
    index_us: list[float] = []
    result = None
    for _ in range(repeats):
        t_index = time.perf_counter()
        m = LookupMatcher([prompt], tokenizer)
        t0 = time.perf_counter()
        index_us.append((t0 - t_index) * 1e6)
        for c in chunks:
            m.feed(c)
        result = m.finish()
        elapsed = time.perf_counter() - t0
        per_token_us.append(elapsed / max(result.output_tokens, 1) * 1e6)
    assert result is not None
    return {
        "method": tokenizer.method,
        "tokens_per_chunk": per_chunk,
        "prompt_chars": len(prompt),
        "output_tokens": result.output_tokens,
        "match_rate": round(result.match_rate or 0.0, 4),
        "us_per_output_token_median": round(statistics.median(per_token_us), 3),
        "us_per_output_token_min": round(min(per_token_us), 3),
        "us_per_output_token_max": round(max(per_token_us), 3),
        "prompt_index_us_median": round(statistics.median(index_us), 1),
        "prompt_index_us_min": round(min(index_us), 1),
    }


def main() -> None:
    repeats = 15
    prompt_long = _text(3000, 1)
    fresh = _text(1000, 2)  # unrelated to the prompt: low match rate
    echo = prompt_long[: len(fresh)]  # copies the prompt: high match rate
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for tok in (load_tokenizer(None), _bpe(Path(tmp))):
            for per_chunk in (1, 8):
                for kind, out in (("fresh", fresh), ("echo", echo)):
                    row = _case(tok, prompt_long, out, per_chunk, repeats)
                    row["output"] = kind
                    cases.append(row)
                    print(
                        f"{row['method']:9s} chunk={per_chunk} {kind:5s} "
                        f"tokens={row['output_tokens']:5d} match={row['match_rate']:.2f} "
                        f"{row['us_per_output_token_min']:.2f} (median "
                        f"{row['us_per_output_token_median']:.2f}) us/token, prompt index "
                        f"{row['prompt_index_us_min'] / 1000:.1f} ms"
                    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "what": "LookupMatcher.feed cost per output token, prompt of ~3000 words",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "repeats": repeats,
                "load_average_1m": round(os.getloadavg()[0], 2),
                "cpus": os.cpu_count(),
                "cases": cases,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
