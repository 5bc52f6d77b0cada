"""``specload sweep`` end to end: the real simulator as the subprocess server, real Locust runs.

Every test checks by PID (process group) that nothing it caused is left running.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specload.core.condition import parse_condition
from specload.core.errors import ConfigError
from specload.core.procgroup import group_alive
from tests.conftest import REPO

PY = shlex.quote(sys.executable)
SIM_CMD = f"{PY} -m specload sim --host 127.0.0.1 --port {{port}} --profile tiny"

SCENARIO = """\
name: sweep-test
max_tokens: 16
min_tokens: 16
ignore_eos: true
arrival: poisson
steps: {steps}
step_duration_s: {duration}
warmup_s: 0.5
max_concurrency: 32
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic:
    input_tokens: 64
    shared_prefix_tokens: 32
    count: 20
"""


def _scenario(tmp_path: Path, steps: str = "[4, 8]", duration: float = 1.5) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.format(steps=steps, duration=duration))
    return path


def _sweep(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specload", "sweep", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _server_pgid(run_dir: Path) -> int:
    match = re.search(r"\[specload\] server pid (\d+)", (run_dir / "server.log").read_text())
    assert match, "server.log names the server's pid"
    return int(match.group(1))


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_condition_flags_declare_speculative_json_and_prefix_caching() -> None:
    spec_json = '{"method":"ngram","num_speculative_tokens":4}'
    spec = parse_condition(f"spec=--speculative-config '{spec_json}'")
    assert spec.flags == ("--speculative-config", spec_json)
    assert spec.as_json() == {
        "speculative": {"method": "ngram", "num_speculative_tokens": 4},
        "prefix_caching": None,
        "source": {"speculative": "declared", "prefix_caching": "unknown"},
    }
    # Unquoted JSON is kept verbatim (a shell split would strip its double quotes).
    unquoted = parse_condition(
        'both=--speculative-config {"method": "ngram"} --enable-prefix-caching'
    )
    assert unquoted.flags == (
        "--speculative-config",
        '{"method": "ngram"}',
        "--enable-prefix-caching",
    )
    assert unquoted.as_json()["speculative"] == {"method": "ngram"}
    assert unquoted.as_json()["prefix_caching"] is True
    assert parse_condition("baseline=", default_prefix_caching=False).as_json() == {
        "speculative": None,
        "prefix_caching": False,
        "source": {"speculative": "unknown", "prefix_caching": "declared"},
    }
    assert parse_condition("off=--no-enable-prefix-caching").prefix_caching is False
    # flags in the server command count too; what nothing says stays unknown
    templated = parse_condition("a=", template="vllm serve m --port {port} --enable-prefix-caching")
    assert templated.as_json()["source"] == {"speculative": "unknown", "prefix_caching": "declared"}


@pytest.mark.parametrize(
    "text, problem",
    [
        ("baseline", "expected NAME=FLAGS"),
        ("spec=--speculative-config {method: ngram}", "not valid JSON"),
        ("spec=--speculative-config '[4]'", "must be a JSON object"),
        ("x=--flag 'unclosed", "cannot split"),
    ],
)
def test_bad_condition_is_a_config_error_naming_it(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as err:
        parse_condition(text)
    assert repr(text) in str(err.value)


def test_bad_input_exits_2_with_one_line_and_starts_nothing(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    cases = [
        ["--server-cmd", SIM_CMD, "--condition", "a=", "--condition", "a=--x"],
        ["--server-cmd", "vllm serve m", "--condition", "a="],
        ["--url", "http://127.0.0.1:9", "--condition", "a=", "--condition", "b="],
        ["--server-cmd", SIM_CMD, "--url", "http://127.0.0.1:9", "--condition", "a="],
        ["--server-cmd", SIM_CMD, "--condition", "a=", "--replicates", "0"],
    ]
    for extra in cases:
        out = _sweep(*extra, "--scenario", str(scenario), "--out", str(tmp_path / "o"))
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    bad_scenario = tmp_path / "bad.yaml"
    bad_scenario.write_text("steps: [1]\nstep_duration_s: -1\n")
    out = _sweep(
        "--server-cmd",
        SIM_CMD,
        "--condition",
        "a=",
        "--scenario",
        str(bad_scenario),
        "--out",
        str(tmp_path / "o"),
    )
    assert out.returncode == 2 and "step_duration_s" in out.stderr
    assert not (tmp_path / "o" / "a" / "server.log").exists()


def test_sweep_runs_each_condition_on_its_own_server_and_stamps_run_json(tmp_path: Path) -> None:
    out_dir = tmp_path / "sweep"
    res = _sweep(
        "--server-cmd",
        SIM_CMD,
        "--condition",
        "baseline=",
        "--condition",
        "prefix=--enable-prefix-caching",
        "--scenario",
        str(_scenario(tmp_path)),
        "--out",
        str(out_dir),
        "--no-compare",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    pgids = []
    for name, prefix_flag in (("baseline", False), ("prefix", True)):
        run_dir = out_dir / name
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["status"] == "completed" and meta["label"] == name
        assert meta["condition"] == {
            "speculative": None,
            "prefix_caching": True if prefix_flag else None,
            "source": {
                "speculative": "unknown",
                "prefix_caching": "declared" if prefix_flag else "unknown",
            },
        }
        cmd = shlex.split(meta["server_cmd"])
        assert cmd[:3] == [sys.executable, "-m", "specload"] and "--port" in cmd
        assert ("--enable-prefix-caching" in cmd) is prefix_flag
        assert meta["target"]["url"].endswith(f":{cmd[cmd.index('--port') + 1]}")
        records = _records(run_dir)
        assert records and all(r["ok"] for r in records)
        assert len(records) == meta["counts"]["sent"]
        pgids.append(_server_pgid(run_dir))
    assert pgids[0] != pgids[1]
    assert not any(group_alive(g) for g in pgids)


def test_server_that_exits_at_start_fails_with_its_log_tail(tmp_path: Path) -> None:
    cmd = f"{PY} -c 'import sys; print(\"CUDA out of memory (pretend)\"); sys.exit(1)' {{port}}"
    out_dir = tmp_path / "sweep"
    res = _sweep(
        "--server-cmd",
        cmd,
        "--condition",
        "baseline=",
        "--condition",
        "spec=",
        "--scenario",
        str(_scenario(tmp_path)),
        "--out",
        str(out_dir),
    )
    assert res.returncode == 1, res.stderr
    assert "exited with code 1" in res.stderr and "CUDA out of memory (pretend)" in res.stderr
    assert "Traceback" not in res.stderr
    assert not group_alive(_server_pgid(out_dir / "baseline"))
    assert not (out_dir / "spec").exists(), "no condition runs after a server failed to start"


def test_server_never_healthy_times_out_and_is_killed(tmp_path: Path) -> None:
    cmd = f"{PY} -c 'import time; print(\"loading weights\", flush=True); time.sleep(60)' {{port}}"
    out_dir = tmp_path / "sweep"
    res = _sweep(
        "--server-cmd",
        cmd,
        "--condition",
        "baseline=",
        "--health-timeout",
        "2",
        "--scenario",
        str(_scenario(tmp_path)),
        "--out",
        str(out_dir),
    )
    assert res.returncode == 1
    assert "within 2 s" in res.stderr and "loading weights" in res.stderr
    assert not group_alive(_server_pgid(out_dir / "baseline"))


def _wait_for(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def _record_count(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except OSError:
        return 0


def test_sigint_marks_the_run_interrupted_keeps_records_and_stops_everything(
    tmp_path: Path,
) -> None:
    out_dir = tmp_path / "sweep"
    args = [
        sys.executable,
        "-m",
        "specload",
        "sweep",
        "--server-cmd",
        SIM_CMD,
        "--condition",
        "baseline=",
        "--condition",
        "spec=",
        "--scenario",
        str(_scenario(tmp_path, "[8, 8, 8, 8]", 5)),
        "--out",
        str(out_dir),
    ]
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        records = out_dir / "baseline" / "requests.jsonl"
        _wait_for(lambda: _record_count(records) >= 5, 60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    run_dir = out_dir / "baseline"
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["server_cmd"] and "--port" in meta["server_cmd"]
    recs = _records(run_dir)  # every line parses: nothing half-written
    assert len(recs) >= 5 and len({r["request_id"] for r in recs}) == len(recs)
    assert not group_alive(_server_pgid(run_dir))
    assert not (out_dir / "spec").exists()
    leftover = [
        p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(out_dir))
    ]
    assert not leftover, "the run process and its children exited"


def _cmdline_has(proc_dir: Path, needle: str) -> bool:
    try:
        return needle in (proc_dir / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_url_target_is_measured_but_never_stopped_and_runs_accumulate(
    sim,
    tmp_path: Path,
) -> None:
    out_dir = tmp_path / "sweep"
    scenario = str(_scenario(tmp_path, "[4]", 1.5))
    first = _sweep(
        "--url", sim.url, "--label", "baseline", "--scenario", scenario, "--out", str(out_dir)
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "one run" in first.stdout and not (out_dir / "report").exists()
    second = _sweep(
        "--url",
        sim.url,
        "--condition",
        "prefix=--enable-prefix-caching",
        "--scenario",
        scenario,
        "--out",
        str(out_dir),
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert sim.proc.poll() is None, "an external server is never stopped"
    meta = json.loads((out_dir / "prefix" / "run.json").read_text())
    assert meta["server_cmd"] is None and meta["condition"]["prefix_caching"] is True
    report = json.loads((out_dir / "report" / "report.json").read_text())
    assert report["baseline"] == "baseline"
    assert set(report["verdict"]) == {"prefix"}


def test_server_that_dies_mid_run_is_reported_and_fails_the_sweep(tmp_path: Path) -> None:
    out_dir = tmp_path / "sweep"
    records = out_dir / "baseline" / "requests.jsonl"
    # The simulator, killed by its own shell as soon as the first records are on disk.
    cmd = f"{SIM_CMD} & while [ ! -s {records} ]; do sleep 0.1; done; kill $!; exit 3 #"
    res = _sweep(
        "--server-cmd", cmd, "--condition", "baseline=",
        "--scenario", str(_scenario(tmp_path, "[4, 4, 4]", 1.5)), "--out", str(out_dir),
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "the server exited with code 3 during the run" in res.stdout
    meta = json.loads((out_dir / "baseline" / "run.json").read_text())
    assert any("exited with code 3" in n for n in meta["notes"])
    recs = _records(out_dir / "baseline")
    assert any(not r["ok"] for r in recs), "requests after the crash are recorded as errors"
    assert not group_alive(_server_pgid(out_dir / "baseline"))


def test_sigint_while_waiting_for_health_stops_the_starting_server(tmp_path: Path) -> None:
    out_dir = tmp_path / "sweep"
    cmd = f"{PY} -c 'import time; time.sleep(60)' {{port}}"
    args = [sys.executable, "-m", "specload", "sweep", "--server-cmd", cmd,
            "--condition", "baseline=", "--health-timeout", "60",
            "--scenario", str(_scenario(tmp_path)), "--out", str(out_dir)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        log = out_dir / "baseline" / "server.log"
        _wait_for(lambda: log.exists() and "server pid" in log.read_text(), 30)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert not group_alive(_server_pgid(out_dir / "baseline"))


def test_replicates_are_interleaved_across_conditions() -> None:
    from specload.protocol.sweep import sweep_order

    a, b = parse_condition("baseline="), parse_condition("spec=--x")
    order = [(c.name, r) for c, r in sweep_order([a, b], 3)]
    assert order == [
        ("baseline", 1), ("spec", 1), ("baseline", 2), ("spec", 2), ("baseline", 3), ("spec", 3)
    ]  # fmt: skip


def test_planned_run_dirs_are_numbered_only_for_several_starts(tmp_path: Path) -> None:
    from specload.protocol.sweep import planned_runs
    from specload.protocol.sweep_plan import SweepPlan

    a, b = parse_condition("baseline="), parse_condition("spec=--x")

    def names(**kw: object) -> list[str]:
        plan = SweepPlan(scenario=tmp_path / "s.yaml", out=tmp_path, **kw)  # type: ignore[arg-type]
        return [d.name for _, _, d in planned_runs(plan)]

    assert names(conditions=[a, b]) == ["baseline", "spec"]
    assert names(conditions=[a, b], replicates=2) == [
        "baseline-r1", "spec-r1", "baseline-r2", "spec-r2"
    ]  # fmt: skip
    url = "http://127.0.0.1:9"
    assert names(conditions=[a], url=url, replicates=2) == ["baseline", "baseline-r2"]
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "run.json").write_text(json.dumps({"label": "baseline"}))
    assert names(conditions=[a], url=url) == ["baseline-r2"]


H200_SIM = f"{PY} -m specload sim --host 127.0.0.1 --port {{port}} --profile h200-llama8b"
DRAFT = '{"method":"draft_model","model":"d","num_speculative_tokens":4}'
REPLICATE_SCENARIO = """\
name: replicates
max_tokens: 64
min_tokens: 64
ignore_eos: true
arrival: constant
steps: [2, 12]
step_duration_s: 3
warmup_s: 1
max_concurrency: 64
metrics_interval_s: 1
prompts:
  synthetic: {input_tokens: 256, count: 20}
"""


def test_replicates_run_interleaved_and_starts_that_disagree_get_no_decision(
    tmp_path: Path,
) -> None:
    """Two starts per condition, interleaved; spec's second start runs on a host whose
    speculation is twice as slow to launch (``--spec-overhead-scale {replicate}``), as the GPU
    validation's host A: compare says the starts disagree, first, and claims no boundary."""
    scenario = tmp_path / "replicates.yaml"
    scenario.write_text(REPLICATE_SCENARIO)
    out_dir = tmp_path / "sweep"
    res = _sweep(
        "--server-cmd",
        H200_SIM + " --start-seed {replicate}",
        "--condition",
        "baseline=",
        "--condition",
        f"spec=--speculative-config '{DRAFT}' --spec-overhead-scale {{replicate}}",
        "--replicates",
        "2",
        "--scenario",
        str(scenario),
        "--out",
        str(out_dir),
        timeout_s=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    names = ["baseline-r1", "spec-r1", "baseline-r2", "spec-r2"]
    metas = [json.loads((out_dir / n / "run.json").read_text()) for n in names]
    assert [m["label"] for m in metas] == ["baseline", "spec", "baseline", "spec"]
    assert [m["replicate"] for m in metas] == [1, 1, 2, 2]
    started = [m["started_at"] for m in metas]
    assert started == sorted(started), "baseline, spec, baseline, spec: interleaved"
    cmds = [shlex.split(m["server_cmd"]) for m in metas]
    assert [c[c.index("--start-seed") + 1] for c in cmds] == ["1", "1", "2", "2"]
    assert [c[c.index("--spec-overhead-scale") + 1] for c in cmds[1::2]] == ["1", "2"]
    pgids = [_server_pgid(out_dir / n) for n in names]
    assert len(set(pgids)) == 4 and not any(group_alive(g) for g in pgids)
    report = json.loads((out_dir / "report" / "report.json").read_text())
    assert {c["label"]: c["server_starts"] for c in report["conditions"]} == {
        "baseline": 2, "spec": 2}  # fmt: skip
    # two starts: their units pooled decide (about these two starts), no config interval;
    # here one start helps where the other hurts, and the verdict says so
    assert {c["ci_scope"] for c in report["conditions"]} == {"these_starts"}
    assert {c["config_ci"] for c in report["conditions"]} == {None}
    x = report["crossover"]["spec"]["tpot_p50"]
    assert len(x["replicate_statuses"]) == 2 and not x["decided"], x
    assert "too_few_starts" not in x
    verdict = report["verdict"]["spec"]
    assert verdict.startswith("spec: server starts disagree on p50 TPOT"), verdict
    assert "spec-r1" in verdict and "spec-r2" in verdict and "stops helping at ≈" not in verdict
    assert "about these 2 server starts only" in verdict
    first = report["findings"][0]  # the starts' effects differ at some step: said first
    assert first.startswith("server starts disagree: spec on p50 TPOT at "), first
    assert "spec-r1" in first and "spec-r2" in first and x["split_qps"], x
    assert any(f.startswith("server starts differ in level: spec at ") for f in report["findings"])


def test_url_runs_into_the_same_out_add_replicates(sim, tmp_path: Path) -> None:
    out_dir = tmp_path / "sweep"
    scenario = str(_scenario(tmp_path, "[4]", 1.0))
    for _ in range(2):
        res = _sweep(
            "--url",
            sim.url,
            "--label",
            "baseline",
            "--speculative-config",
            "off",
            "--prefix-caching",
            "off",
            "--scenario",
            scenario,
            "--out",
            str(out_dir),
            "--no-compare",
        )
        assert res.returncode == 0, res.stdout + res.stderr
    first = json.loads((out_dir / "baseline" / "run.json").read_text())
    second = json.loads((out_dir / "baseline-r2" / "run.json").read_text())
    assert (first["replicate"], second["replicate"]) == (1, 2)
    assert second["condition"] == {
        "speculative": None,
        "prefix_caching": False,
        "source": {"speculative": "declared", "prefix_caching": "declared"},
    }
