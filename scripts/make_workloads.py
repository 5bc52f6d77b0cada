"""Write the example workloads specload ships (``scripts/sample_workloads.py``).

    python scripts/make_workloads.py      # rewrites scenarios/prompts/, scenarios/traces/

The files are committed; ``tests/test_sample_workloads.py`` checks they are what this makes.
"""

from __future__ import annotations

import json
from pathlib import Path

from sample_workloads import mixed_traffic, sample_trace

REPO = Path(__file__).resolve().parent.parent
MIXED = REPO / "scenarios" / "prompts" / "mixed-traffic.jsonl"
TRACES = {
    "specload": REPO / "scenarios" / "traces" / "sample.jsonl",
    "mooncake": REPO / "scenarios" / "traces" / "mooncake-sample.jsonl",
}


def _lines(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows)


def mixed_lines() -> str:
    return _lines(mixed_traffic())


def trace_lines(fmt: str) -> str:
    return _lines(sample_trace(fmt=fmt))


def main() -> None:
    MIXED.parent.mkdir(parents=True, exist_ok=True)
    MIXED.write_text(mixed_lines(), encoding="utf-8")
    print(f"wrote {MIXED.relative_to(REPO)}: {len(mixed_traffic())} prompts")
    for fmt, path in TRACES.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(trace_lines(fmt), encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}: a {fmt} trace")


if __name__ == "__main__":
    main()
