"""The GPU kit's usage and its reference client's request counts (no servers here; the whole
kit runs end to end in tests/vllm/test_gpu_kit.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
import kit


def _run_kit(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", *args],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_help_lists_the_knobs_and_a_wrong_argument_is_refused() -> None:
    helped = _run_kit("--help")
    assert helped.returncode == 0
    for knob in ("--dry-run", "REPLICATES", "TARGET", "SPEC_CONFIG", "SITE", "BENCH_S"):
        assert knob in helped.stdout
    wrong = _run_kit("--gpu")
    assert wrong.returncode == 2 and "usage: bash benchmarks/gpu/run.sh" in wrong.stderr


def test_an_earlier_run_is_never_overwritten(tmp_path) -> None:
    out = tmp_path / "kit"
    out.mkdir()
    (out / "keep.txt").write_text("earlier")
    res = _run_kit("--dry-run", OUT=str(out))
    assert res.returncode == 2 and "already holds files" in res.stderr
    assert (out / "keep.txt").read_text() == "earlier" and len(list(out.iterdir())) == 1


def test_reference_request_counts_are_the_calibrations() -> None:
    """vLLM's bench serve at rate R sent min(max(32, 20 R), 800) prompts in the calibration;
    the kit sends the same counts, so its reference is the calibration's load."""
    data = json.loads(
        (REPO / "benchmarks" / "data" / "h200-vllm0.26-llama8b-draft1b.json").read_text()
    )
    for row in data["rows"]:
        assert kit.num_prompts(row["rate_rps"], 20, 32) == row["completed"] + row["failed"], row
