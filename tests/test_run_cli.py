"""``specload run``: bad input fails in a second with one line and exit 2; Ctrl-C leaves an
``interrupted`` run with every record; the API key is never written anywhere."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import stop_process

SCENARIO = """\
name: cli
max_tokens: 16
steps: [4, 4]
step_duration_s: {duration}
warmup_s: 1
max_concurrency: 8
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic: {{input_tokens: 32, count: 10}}
"""


def _scenario(tmp: Path, duration: float = 2) -> Path:
    p = tmp / "s.yaml"
    p.write_text(SCENARIO.format(duration=duration))
    return p


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specload", "run", *args],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_bad_scenario_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [1, 2]\nmax_concurency: 4\n")
    line = _one_error_line(
        _run(
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(bad),
            "--label",
            "l",
            "--out",
            "o",
            cwd=tmp_path,
        )
    )
    assert "error: bad.yaml: max_concurency" in line  # as typed, from cwd
    assert not (tmp_path / "o").exists()


def test_host_without_scheme_is_refused(tmp_path: Path) -> None:
    line = _one_error_line(
        _run(
            "--host",
            "127.0.0.1:8000",
            "--scenario",
            str(_scenario(tmp_path)),
            "--label",
            "l",
            "--out",
            "o",
            cwd=tmp_path,
        )
    )
    assert "--host" in line and "scheme" in line


def test_unwritable_out_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    line = _one_error_line(
        _run(
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(_scenario(tmp_path)),
            "--label",
            "l",
            "--out",
            "file/run",
            cwd=tmp_path,
        )
    )
    assert "not a writable directory" in line


def test_missing_scenario_file_is_refused(tmp_path: Path) -> None:
    line = _one_error_line(
        _run(
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            "nope.yaml",
            "--label",
            "l",
            "--out",
            "o",
            cwd=tmp_path,
        )
    )
    assert "nope.yaml" in line


def test_bad_speculative_declaration_is_refused(tmp_path: Path) -> None:
    line = _one_error_line(
        _run(
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(_scenario(tmp_path)),
            "--label",
            "l",
            "--out",
            "o",
            "--speculative-config",
            "{k: 4",
            cwd=tmp_path,
        )
    )
    assert "--speculative-config" in line


def test_declarations_and_key_handling(sim, tmp_path: Path) -> None:
    """Condition and server command land in run.json; the key lands nowhere."""
    key = "sk-test-never-written-42"
    res = _run(
        "--host",
        sim.url,
        "--scenario",
        str(_scenario(tmp_path, duration=1)),
        "--label",
        "spec",
        "--out",
        "o",
        "--api-key",
        key,
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 4}',
        "--prefix-caching",
        "off",
        "--server-cmd",
        "vllm serve m --speculative-config '{...}'",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "o" / "run.json").read_text())
    assert meta["condition"] == {
        "speculative": {"method": "ngram", "num_speculative_tokens": 4},
        "prefix_caching": False,
        "source": {"speculative": "declared", "prefix_caching": "declared"},
    }
    assert meta["server_cmd"] == "vllm serve m --speculative-config '{...}'"
    assert meta["status"] == "completed" and meta["counts"]["recorded"] > 0
    for f in (tmp_path / "o").iterdir():
        assert key not in f.read_text(errors="replace"), f.name
    assert key not in res.stdout + res.stderr
    # no text either unless asked for (--store-text)
    first = json.loads((tmp_path / "o" / "requests.jsonl").read_text().splitlines()[0])
    assert "prompt_text" not in first and "output_text" not in first and first["prompt_sha256"]


def _records(run_dir: Path) -> list[dict[str, Any]]:
    """The records written so far (a line still being written is not one yet)."""
    try:
        lines = (run_dir / "requests.jsonl").read_text().splitlines(keepends=True)
    except FileNotFoundError:
        return []
    return [json.loads(x) for x in lines if x.endswith("\n")]


def _wait_for_a_record_of_step_0(run_dir: Path, timeout_s: float = 60) -> None:
    """Until the run is inside its first step, with requests back from it: step 0 is in
    steps.json (announced when it starts) and a record of it is in requests.jsonl."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            steps = json.loads((run_dir / "steps.json").read_text())
            if steps and any(r["step"] == 0 for r in _records(run_dir)):
                return
        time.sleep(0.05)
    raise TimeoutError(f"{run_dir}: no record of step 0 within {timeout_s} s")


@pytest.mark.slow
def test_sigint_leaves_an_interrupted_run_with_every_record(sim, tmp_path: Path) -> None:
    """Ctrl-C once the first step has requests back (60-s steps: it lands in that step)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            sim.url,
            "--scenario",
            str(_scenario(tmp_path, duration=60)),
            "--label",
            "i",
            "--out",
            "o",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    run_json = tmp_path / "o" / "run.json"
    try:
        _wait_for_a_record_of_step_0(tmp_path / "o")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        stop_process(proc)
    assert proc.returncode == 130, err
    meta = json.loads(run_json.read_text())
    records = (tmp_path / "o" / "requests.jsonl").read_text().splitlines()
    assert meta["status"] == "interrupted" and meta["ended_at"]
    assert meta["counts"]["sent"] == meta["counts"]["recorded"] == len(records) > 0
    steps = json.loads((tmp_path / "o" / "steps.json").read_text())
    assert [s["index"] for s in steps] == [0]  # stopped inside the first step
    assert steps[-1]["end"] <= meta["ended_at"]


def test_store_text_writes_prompt_and_output_text(sim, tmp_path: Path) -> None:
    res = _run(
        "--host",
        sim.url,
        "--scenario",
        str(_scenario(tmp_path, duration=1)),
        "--label",
        "t",
        "--out",
        "o",
        "--store-text",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    first = json.loads((tmp_path / "o" / "requests.jsonl").read_text().splitlines()[0])
    assert first["prompt_text"] and first["output_text"]
    assert len(first["output_text"]) == first["output_chars"]


def test_speculation_declared_off_and_undeclared_are_told_apart(sim, tmp_path: Path) -> None:
    """``--speculative-config off`` declares no speculation; nothing given is "unknown", for
    compare to read from the server's /metrics (never guessed from the label)."""
    scenario = str(_scenario(tmp_path, duration=1))
    off = _run(
        "--host",
        sim.url,
        "--scenario",
        scenario,
        "--label",
        "candidate-build",
        "--out",
        "off",
        "--speculative-config",
        "off",
        cwd=tmp_path,
    )
    plain = _run(
        "--host",
        sim.url,
        "--scenario",
        scenario,
        "--label",
        "candidate-build",
        "--out",
        "plain",
        cwd=tmp_path,
    )
    assert off.returncode == 0 and plain.returncode == 0, off.stderr + plain.stderr
    source = {
        d: json.loads((tmp_path / d / "run.json").read_text())["condition"]["source"]
        for d in ("off", "plain")
    }
    assert source == {
        "off": {"speculative": "declared", "prefix_caching": "unknown"},
        "plain": {"speculative": "unknown", "prefix_caching": "unknown"},
    }
    bad = _run(
        "--host",
        sim.url,
        "--scenario",
        scenario,
        "--label",
        "x",
        "--out",
        "bad",
        "--speculative-config",
        "maybe",
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--speculative-config" in bad.stderr and "'off'" in bad.stderr


def test_exact_tokens_against_a_failing_tokenize_fails_with_the_reason_last(
    sim_factory, tmp_path: Path
) -> None:
    """Every /tokenize connection resets: the estimate would do, but the scenario demands
    exact counts, so the run fails before any load with the reason on the last line."""
    sim = sim_factory("--profile", "tiny", "--fault-tokenize-reset-every", "1", "--ground-truth")
    scenario = _scenario(tmp_path, duration=1)
    scenario.write_text(
        scenario.read_text().replace("count: 10}", "count: 10, exact_tokens: true}")
    )
    res = _run("--host", sim.url, "--scenario", str(scenario), "--label", "t", "--out", "o",
               cwd=tmp_path)  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("specload run: run failed: ") and "exact_tokens: true" in last, last
    meta = json.loads((tmp_path / "o" / "run.json").read_text())
    assert meta["status"] == "failed" and meta["counts"]["sent"] == 0
    with urllib.request.urlopen(sim.url + "/debug/requests", timeout=10) as r:
        assert [
            g for g in json.load(r) if not g["request_id"].startswith("specload-preflight")
        ] == []
