"""Every input file is read in full before any traffic: a broken line is bad input.

A prompt-file line the run could not use was found only once the run had started: exit 1
(the degraded code), ``run failed: run failed: ConfigError: ...`` and a failed run directory
left behind. Now each input file (scenario, prompt file, trace, baseline run) is read as the
run will read it before the output directory is made and before the pre-flight: one line
naming the file, the line and what was expected, exit 2, no run directory, and the server
never sees a request. ``specload run`` is driven as a user types it, against a simulator
that keeps every request it answers (``--ground-truth``); the baseline through a headless
Locust master, the one way a run takes ``--baseline-run``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from specload.cli.run import _reason
from specload.scenario import load_scenario
from specload.scenario.preparation import PreparationFailed, prepare_prompts
from tests.conftest import REPO

GOOD = {"messages": [{"role": "user", "content": "hello there"}]}
HEAD = "name: v\nsteps: [2]\nstep_duration_s: 1\nwarmup_s: 0\nmax_tokens: 4\n"
TRACE_OK = {"timestamp": 0, "input_tokens": 8, "output_tokens": 4}


def _jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


#: case -> (file name, its text, the scenario's input key, the expected line's ending)
CASES = {
    "prompt line not JSON": (
        "p.jsonl",
        _jsonl(GOOD, '{"messages": [', GOOD),
        "prompts: {file: p.jsonl}",
        "p.jsonl: line 2: not JSON (",
    ),
    "prompt message without content": (
        "p.jsonl",
        _jsonl(GOOD, GOOD, {"messages": [{"role": "user"}]}),
        "prompts: {file: p.jsonl}",
        'p.jsonl: line 3.messages[0]: expected {"role": str, "content": ...}',
    ),
    "prompt max_tokens 0": (
        "p.jsonl",
        _jsonl(GOOD, {**GOOD, "max_tokens": 0}),
        "prompts: {file: p.jsonl}",
        "p.jsonl: line 2.max_tokens: got 0 (expected an integer >= 1)",
    ),
    "prompt line of another format": (
        "p.jsonl",
        _jsonl(GOOD, {"conversations": [{"from": "human", "value": "hi"}]}),
        "prompts: {file: p.jsonl}",
        "p.jsonl: line 2: not a specload entry like the first one (",
    ),
    "sharegpt item without a human turn": (
        "sg.json",
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": "hi"}]},
                {"conversations": [{"from": "gpt", "value": "hello"}]},
            ]
        ),
        "prompts: {file: sg.json}",
        "sg.json: [1]: no human turn (expected a 'from': 'human' turn)",
    ),
    "trace line without output_tokens": (
        "t.jsonl",
        _jsonl(TRACE_OK, {"timestamp": 1, "input_tokens": 8}, {**TRACE_OK, "timestamp": 2}),
        "arrival: trace\ntrace: t.jsonl",
        "t.jsonl: line 2.output_tokens: got None (expected an integer >= 1)",
    ),
}


def _sim_requests(url: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(url + "/debug/requests", timeout=5) as r:
        return list(json.load(r))


def _specload_run(cwd: Path, host: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "specload", "run", "--host", host, "--scenario", "s.yaml"]
    cmd += ["--label", "v", "--out", "runs/v"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_input_line_is_one_line_exit_2_before_any_traffic(
    case: str, sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    name, text, key, expected = CASES[case]
    (tmp_path / name).write_text(text)
    (tmp_path / "s.yaml").write_text(HEAD + key + "\n")
    proc = _specload_run(tmp_path, sim.url)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, lines
    assert lines[0].startswith(f"specload run: error: {name}: "), lines[0]  # as typed, from cwd
    assert lines[0].endswith(expected) or expected in lines[0], (lines[0], expected)
    assert "ConfigError" not in lines[0] and lines[0].count("error") == 1, lines[0]
    assert not (tmp_path / "runs").exists()  # no run directory, not even its parent
    assert _sim_requests(sim.url) == []  # not even the pre-flight's request


def test_the_same_scenario_with_the_line_fixed_runs(sim_factory, tmp_path: Path) -> None:
    """The control: the simulator, the scenario and the command are fine; only the line was
    wrong."""
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    (tmp_path / "p.jsonl").write_text(_jsonl(GOOD, GOOD, {**GOOD, "max_tokens": 3}))
    (tmp_path / "s.yaml").write_text(HEAD + "prompts: {file: p.jsonl}\n")
    proc = _specload_run(tmp_path, sim.url)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "v" / "requests.jsonl").read_text().strip()
    seen = [str(r["request_id"]) for r in _sim_requests(sim.url)]
    assert any(r.startswith("specload-preflight-") for r in seen) and len(seen) > 1, seen


def test_a_baseline_without_records_is_refused_before_any_traffic(
    sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory("--profile", "tiny", "--ground-truth")
    (tmp_path / "s.yaml").write_text(HEAD)
    base = tmp_path / "base"
    base.mkdir()
    (base / "run.json").write_text(json.dumps({"label": "base", "status": "completed"}))
    (base / "requests.jsonl").write_text("not json\n\n")
    cmd = [
        sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"),
        "--headless", "--host", sim.url, "--scenario", "s.yaml", "--label", "v",
        "--run-dir", "runs/v", "--baseline-run", "base",
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    errors = [x for x in proc.stderr.splitlines() if x.startswith("specload: error: ")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert errors == [
        "specload: error: base/requests.jsonl: --baseline-run: no records "
        "(expected a finished specload run: one JSON record per line)"
    ], proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()
    assert _sim_requests(sim.url) == []


# --- a file that breaks after it was checked: the run fails with its one line -----------------
def test_a_prompt_file_broken_after_the_check_fails_preparation_with_its_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "p.jsonl").write_text(_jsonl(GOOD))
    (tmp_path / "s.yaml").write_text(HEAD + "prompts: {file: p.jsonl}\n")
    scenario = load_scenario(tmp_path / "s.yaml")
    (tmp_path / "p.jsonl").write_text(_jsonl(GOOD, "{"))
    with pytest.raises(PreparationFailed) as err:
        prepare_prompts(scenario, "http://127.0.0.1:9", None, None, tokenizer=lambda *a: None)
    assert str(err.value).startswith(f"{tmp_path / 'p.jsonl'}: line 2: not JSON (")


@pytest.mark.parametrize(
    ("note", "shown"),
    [
        ("run failed: ConfigError: p.jsonl: line 2: not JSON", "p.jsonl: line 2: not JSON"),
        ("run failed: PreflightError: cannot reach", "cannot reach"),
        ("p.jsonl: line 2: not JSON", "p.jsonl: line 2: not JSON"),
        ("run failed: KeyError: 'x'", "KeyError: 'x'"),  # a bug keeps its name
    ],
)
def test_a_failed_runs_reason_is_said_once_without_our_class_names(note: str, shown: str) -> None:
    assert _reason(note) == shown
