"""A warm-up shorter than the step's requests is named: the batch was still filling.

On the simulator at 20 req/s with 1-s block warm-ups and 2.5-s requests, the per-second
engine steps climbed through every block and the regime reading missed a 42 % slow share.
"""

from __future__ import annotations

from pathlib import Path

from analysis.synth_rundir import SPEC, Cond, scenario, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.comparison import ShortWarmup
from specload.report import compare_words

QPS = (2, 8, 32)


def _warnings(tmp_path: Path, sc: dict[str, object], meta: dict[str, object]) -> list[ShortWarmup]:
    dirs = [
        write_run(tmp_path / "b", Cond("baseline", extra_meta=meta), qps=QPS, n=120, sc=sc),
        write_run(tmp_path / "s", Cond("spec", speculative=SPEC, extra_meta=meta), qps=QPS,
                  n=120, sc=sc),
    ]  # fmt: skip
    return [w for w in compare_runs(dirs, bootstrap=100).warnings if isinstance(w, ShortWarmup)]


def test_a_step_warm_up_shorter_than_its_requests_names_those_steps(tmp_path: Path) -> None:
    # synthetic E2E: ~0.7 s at 2 req/s, ~1.7 s at 32 req/s
    [short, _] = _warnings(tmp_path, scenario(warmup_s=1.0), {})
    assert (short.condition, short.warmup_s, short.setting) == ("baseline", 1.0, "warmup_s")
    [(q, e2e)] = short.steps  # 2 and 8 req/s: requests shorter than the warm-up
    assert q == 32 and 1.75 <= e2e < 1.85
    assert compare_words.warning_text(short).endswith("(lengthen warmup_s to at least 2 s)")


def test_interleaved_blocks_name_the_block_warm_up(tmp_path: Path) -> None:
    meta = {"interleave": {"block_warmup_s": 0.5, "blocks_per_cell": 4}}
    found = _warnings(tmp_path, scenario(), meta)
    assert len(found) == 2 and all(w.setting == "interleave: block_warmup_s" for w in found)


def test_a_warm_up_longer_than_the_requests_says_nothing(tmp_path: Path) -> None:
    assert _warnings(tmp_path, scenario(warmup_s=5.0), {}) == []
