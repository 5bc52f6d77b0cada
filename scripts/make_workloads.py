"""Write the example workloads specload ships (``specload/scenario/sample_workloads.py``).

    python scripts/make_workloads.py      # rewrites scenarios/prompts/mixed-traffic.jsonl

The files are committed; ``tests/test_sample_workloads.py`` checks they are what this makes.
"""

from __future__ import annotations

import json
from pathlib import Path

from specload.scenario.sample_workloads import mixed_traffic

REPO = Path(__file__).resolve().parent.parent
MIXED = REPO / "scenarios" / "prompts" / "mixed-traffic.jsonl"


def mixed_lines() -> str:
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in mixed_traffic())


def main() -> None:
    MIXED.parent.mkdir(parents=True, exist_ok=True)
    MIXED.write_text(mixed_lines(), encoding="utf-8")
    print(f"wrote {MIXED.relative_to(REPO)}: {len(mixed_traffic())} prompts")


if __name__ == "__main__":
    main()
