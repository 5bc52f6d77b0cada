"""``specload compare``: reports written, exit codes 0 / 1 / 2, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from analysis.synth_rundir import SPEC, Cond, linear_gain, scenario, write_run

from specload.cli.main import main


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cli")
    return (
        write_run(d / "base", Cond("baseline"), qps=(2, 4, 8, 16, 32)),
        write_run(
            d / "spec",
            Cond(
                "spec-ngram-k4",
                speculative=SPEC,
                tpot=linear_gain(0.25, 2, 0.1),
                acceptance_rate=0.6,
            ),
            qps=(2, 4, 8, 16, 32),
        ),
    )


def test_compare_writes_reports_and_prints_the_verdict(
    pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["compare", str(pair[0]), str(pair[1]), "--out", str(tmp_path / "r"), "--no-html"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "spec-ngram-k4 lowers p50 TPOT" in out and "stops helping at ≈" in out
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    x = data["crossover"]["spec-ngram-k4"]["tpot_p50"]
    assert (
        x["status"] == "crosses"
        and x["baseline"] == "baseline"
        and x["tested_range"] == [2.0, 32.0]
    )
    assert x["ci"][0] < x["qps"] < x["ci"][1]
    assert set(data["crossover"]["spec-ngram-k4"]) == {
        "tpot_p50",
        "tpot_p95",
        "e2e_p50",
        "e2e_p95",
        "ttft_p50",
    }
    step = data["steps"]["spec-ngram-k4"][0]
    assert step["server"]["acceptance_rate"] == pytest.approx(0.6)
    assert step["error_rate"] == 0.0 and step["latency_s"]["tpot_p50"]["lo"] is not None
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.count("\n") < 400 and "| QPS |" in md and "spec-ngram-k4 lowers p50 TPOT" in md


def test_gate_beyond_the_limit_exits_1_and_names_the_step(
    pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "compare",
            *map(str, pair),
            "--out",
            str(tmp_path / "r"),
            "--no-html",
            "--quiet",
            "--max-regression",
            "tpot_p50=0.5",
            "--min-gain",
            "0.01",
        ]
    )
    # +2.7 % at 32 req/s with a tight CI: it hurts by the report's rule (--min-gain 1 %)
    assert rc == 1
    err = capsys.readouterr().err
    assert "gate failed: spec-ngram-k4: tpot_p50 +" in err and "at 32 req/s" in err
    assert json.loads((tmp_path / "r" / "report.json").read_text())["gates"]["passed"] is False


def test_junit_has_a_testcase_per_gate_and_verdict_and_a_failure_for_the_failed_gate(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    junit = tmp_path / "ci" / "specload.xml"
    gates = ["--max-regression", "tpot_p50=0.5", "--max-regression", "ttft_p50=50"]
    args = ["compare", *map(str, pair), "--out", str(tmp_path / "r"), "--no-html", "--quiet"]
    rc = main([*args, *gates, "--min-gain", "0.01", "--junit", str(junit)])
    assert rc == 1
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    gate = "specload.gate.spec-ngram-k4"
    checks = [name for cls, name in cases if cls == gate]  # one per gate, condition and step
    steps = sorted({name.rsplit(" at ", 1)[1] for name in checks})
    assert len(checks) == 2 * len(steps) and int(suite.get("tests") or 0) == len(checks) + 1
    assert all(len(c.findall("failure")) <= 1 for c in cases.values())
    failed = cases[(gate, "tpot_p50 at most +0.5 % at 32 req/s")]
    failure = failed.find("failure")
    assert failure is not None and "at 32 req/s" in (failure.get("message") or "")
    passed = cases[(gate, "ttft_p50 at most +50 % at 32 req/s")]
    assert passed.find("failure") is None
    assert "within +50 %" in (passed.findtext("system-out") or "")
    verdict = cases[("specload.verdict", "spec-ngram-k4")]
    assert verdict.find("failure") is None
    assert "lowers p50 TPOT" in (verdict.findtext("system-out") or "")


def test_gate_up_to_the_operating_point_passes(
    pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "compare",
            *map(str, pair),
            "--out",
            str(tmp_path / "r"),
            "--no-html",
            "--quiet",
            "--max-regression",
            "tpot_p50=0.5",
            "--operating-qps",
            "8",
        ]
    )
    assert rc == 0
    passed = [x for x in capsys.readouterr().err.splitlines() if x.startswith("gate passed: ")]
    assert len(passed) == 1 and passed[0].startswith("gate passed: spec-ngram-k4: tpot_p50 ")
    assert "req/s, within +0.5 %" in passed[0]


@pytest.mark.parametrize(
    ("make", "extra", "expected"),
    [
        ("missing", [], "run directory does not exist"),
        ("no_run_json", [], "not a specload run directory (no run.json)"),
        ("empty", [], "requests.jsonl holds no records"),
        (
            "workers_count",
            [],
            "run.json: workers: 2 is not of type 'array' (expected a list of worker ids)",
        ),
        ("ok", ["--max-regression", "tpot=5"], "--max-regression 'tpot=5': expected METRIC=PCT"),
        ("ok", ["--metric", "speed"], "--metric 'speed': expected one of"),
        ("ok", ["--baseline", "nobody"], "--baseline: 'nobody' is no condition"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    pair: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: str,
    extra: list[str],
    expected: str,
) -> None:
    bad = tmp_path / "bad"
    if make in ("no_run_json", "empty"):
        bad.mkdir()
    if make == "empty":
        (bad / "run.json").write_text('{"label": "x"}')
        (bad / "requests.jsonl").write_text("")
    if make == "workers_count":  # a run.json whose workers is a count, not a list of ids
        shutil.copytree(pair[1], bad)
        meta = json.loads((bad / "run.json").read_text())
        (bad / "run.json").write_text(json.dumps({**meta, "workers": 2}))
    dirs = [str(pair[0]), str(pair[1])] if make == "ok" else [str(pair[0]), str(bad)]
    rc = main(["compare", *dirs, "--out", str(tmp_path / "r"), "--no-html", *extra])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and expected in err and err.startswith("specload compare: error: ")


def test_incomparable_runs_are_refused_with_their_differences_unless_forced(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4), metrics=False)
    other = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC),
        qps=(2, 4),
        metrics=False,
        sc=scenario(prompts={"kind": "synthetic", "input_tokens": 1024, "count": 200, "seed": 7}),
    )
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "compare",
        str(base),
        str(other),
        "--out",
        str(tmp_path / "r"),
        "--no-html",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and "not comparable (use --force" in lines[0]
    assert lines[1] == "  scenario.prompts.input_tokens: 256 in baseline | 1024 in spec"
    forced = subprocess.run(
        [*cmd, "--force", "--quiet"], capture_output=True, text=True, timeout=120, check=False
    )
    assert forced.returncode == 0, forced.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["comparability"]["forced"] is True
    assert any("input_tokens" in d for d in report["comparability"]["differences"])
    assert "compared with --force despite" in (tmp_path / "r" / "report.md").read_text()
