"""Headless Locust with ``--baseline-run``, end to end on the simulator, as CI runs it.

A prompt file of two categories of very different lengths (code edits, one-line questions)
ordered so that the first step sends mostly code: its settled view and the whole baseline
have very different overall median prompt lengths, per class the same. The run ends with the
final "vs baseline" line and exit 0; a live run whose code prompts really are longer gets no
comparison, says why, and exits 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import SimServer, specload_run, start_sim
from tests.locust.runcheck import LOCUSTFILE

pytestmark = pytest.mark.slow

SCENARIO = """\
name: two-classes
max_tokens: 32
min_tokens: 32
ignore_eos: true
arrival: constant
steps: [4, 8]
step_duration_s: 3
warmup_s: 1
max_concurrency: 32
request_timeout_s: 20
prompts:
  file: two.jsonl
"""


def write_two_classes(folder: Path, code_words: int = 30) -> Path:
    """The scenario and its prompt file: 12 code edits first, then 40 short questions."""
    folder.mkdir(parents=True, exist_ok=True)
    code = " ".join(f"x{j} = y{j} + 1" for j in range(code_words))
    lines = [
        {"id": f"code-{i}", "category": "code", "messages": [{"role": "user", "content": code}]}
        for i in range(12)
    ] + [
        {
            "id": f"q-{i}",
            "category": "questions",
            "messages": [{"role": "user", "content": f"{i}?"}],
        }
        for i in range(40)
    ]
    (folder / "two.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "two.yaml").write_text(SCENARIO)
    return folder / "two.yaml"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> SimServer:
    server = start_sim("--profile", "tiny", log_dir=tmp_path_factory.mktemp("sim"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def baseline(sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The baseline run and its scenario (a live run names the same prompt file)."""
    root = tmp_path_factory.mktemp("base")
    scenario = write_two_classes(root / "s")
    return specload_run(sim.url, scenario, "baseline", root / "base"), scenario


def locust(
    cwd: Path, host: str, scenario: Path, *extra: str, merged: bool = False
) -> subprocess.CompletedProcess[str]:
    """Headless Locust with specload's options, as a CI job types it (``merged``: stderr into
    stdout, in the order a CI log shows them)."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host]
    cmd += ["--scenario", str(scenario), "--label", "live", "--run-dir", str(cwd / "live")]
    return subprocess.run(
        [*cmd, *extra], cwd=cwd, stdout=subprocess.PIPE, text=True, timeout=180, check=False,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
    )  # fmt: skip


def test_a_mixed_prompt_file_ends_with_the_final_vs_baseline_line_and_exit_0(
    sim: SimServer, baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    base, scenario = baseline
    res = locust(tmp_path, sim.url, scenario, "--baseline-run", str(base))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "[specload] vs baseline (final, 2 steps): live " in out
    assert "failed" not in out and "Traceback" not in out
    assert "spawn rate is very high" not in out  # specload's pool is spawned at once by design


def test_a_live_comparison_that_fails_is_exit_1_with_its_reason(
    sim: SimServer, baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    base, scenario = baseline
    write_two_classes(scenario.parent, code_words=60)  # the same file, code twice as long
    try:
        res = locust(tmp_path, sim.url, scenario, "--baseline-run", str(base))
    finally:
        write_two_classes(scenario.parent)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    line = next(x for x in out.splitlines() if "no final comparison" in x)
    assert "median prompt_tokens (code)" in line and "questions" not in line


def test_a_failed_gate_on_locusts_command_line_is_exit_1_with_a_junit_failure(
    baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    """One command for CI: the run, the comparison, the gate and the JUnit file. The server
    answers every request 50 ms later, so p50 TTFT is far beyond +10 %."""
    base, scenario = baseline
    slow = start_sim(
        "--profile", "tiny", "--profile-set", "frontend_delay_s=0.05", log_dir=tmp_path
    )
    try:
        gate = ["--max-regression", "ttft_p50=10", "--junit", str(tmp_path / "junit.xml")]
        res = locust(tmp_path, slow.url, scenario, "--baseline-run", str(base), *gate, merged=True)
    finally:
        slow.stop()
    out = res.stdout
    assert res.returncode == 1, out[-3000:]
    gate = res.stdout.index("[specload] gate failed: live: ttft_p50 +")
    assert gate > res.stdout.index("Response time percentiles")  # last in the CI log
    assert "(sent " in res.stdout and ", unrecorded 0)" in res.stdout  # the accounting
    suite = ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures") or 0) >= 1
    cases = [c for c in suite.iter("testcase") if c.get("name", "").startswith("ttft_p50 at most")]
    assert cases and all(len(c.findall("failure")) <= 1 for c in cases)  # one check each
    assert any(c.find("failure") is not None for c in cases)


def test_a_gate_that_can_check_nothing_is_exit_2_before_traffic_with_a_junit_error(
    baseline: tuple[Path, Path], tmp_path: Path
) -> None:
    base, scenario = baseline
    junit = tmp_path / "reports" / "x.xml"
    gate = ["--max-regression", "tpot_p95=10", "--operating-qps", "1", "--junit", str(junit)]
    res = locust(tmp_path, "http://127.0.0.1:9", scenario, "--baseline-run", str(base), *gate)
    assert res.returncode == 2, (res.stdout + res.stderr)[-3000:]
    assert "no scenario step at or below it" in res.stderr
    assert "Response time percentiles" not in res.stdout  # no traffic was sent
    error = ElementTree.parse(junit).getroot().find(".//testcase/error")
    assert error is not None and "--operating-qps 1: no scenario step" in (
        error.get("message") or ""
    )
