"""Bad paths and bad targets on every command: one clear line naming the culprit, exit 2.

``run``, ``compare``, ``sweep`` and ``inspect`` are driven in-process through
``specload.cli.main.main`` (argparse exits are caught), so each case costs milliseconds;
none of them may reach a server or start Locust.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from specload.cli.main import main

GOOD = "name: ok\nsteps: [1]\nstep_duration_s: 1\nwarmup_s: 0\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def one_line(command: str, *argv: str) -> str:
    """Run ``specload COMMAND ARGV``; assert exit 2 and exactly one error line; return it."""
    code, out, err = cli(command, *argv)
    assert "Traceback" not in out + err, err
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"specload {command}: error: ") or "error:" in lines[0], lines
    return lines[0]


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    """A zoo of bad inputs, each made so that it is bad even for root."""
    p = {
        "missing": tmp_path / "missing",
        "empty_dir": tmp_path / "empty",
        "foreign_dir": tmp_path / "foreign",
        "junk_run_json": tmp_path / "junk",
        "alien_run_json": tmp_path / "alien",
        "no_records": tmp_path / "norecs",
        "binary": tmp_path / "binary.yaml",
        "dangling": tmp_path / "dangling",
        "good": tmp_path / "good.yaml",
        "afile": tmp_path / "afile",
    }
    p["empty_dir"].mkdir()
    p["foreign_dir"].mkdir()
    (p["foreign_dir"] / "notes.txt").write_text("not a run\n")
    p["junk_run_json"].mkdir()
    (p["junk_run_json"] / "run.json").write_text("{not json")
    p["alien_run_json"].mkdir()
    (p["alien_run_json"] / "run.json").write_text(json.dumps({"hello": "world"}))
    p["no_records"].mkdir()
    (p["no_records"] / "run.json").write_text(
        json.dumps({"schema_version": 1, "run_id": "r", "label": "l", "status": "completed"})
    )
    (p["no_records"] / "requests.jsonl").write_text("")
    p["binary"].write_bytes(b"\xff\xfe\x00steps: [1]\n\x80")
    p["dangling"].symlink_to(tmp_path / "nowhere")
    p["good"].write_text(GOOD)
    p["afile"].write_text("x")
    return p


# --- run -----------------------------------------------------------------------------------
def run_args(
    scenario: Path | str, tmp: Path, host: str = "http://127.0.0.1:9", out: str = "out"
) -> list[str]:
    return ["--host", host, "--scenario", str(scenario), "--label", "l", "--out", str(tmp / out)]


@pytest.mark.parametrize("name", ["missing", "empty_dir", "binary", "dangling"])
def test_run_with_an_unusable_scenario_path_names_it(
    paths: dict[str, Path], tmp_path: Path, name: str
) -> None:
    line = one_line("run", *run_args(paths[name], tmp_path))
    assert str(paths[name]) in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost", "ftp://127.0.0.1:21", ""])
def test_run_with_a_host_without_http_scheme_is_refused(
    paths: dict[str, Path], tmp_path: Path, host: str
) -> None:
    line = one_line("run", *run_args(paths["good"], tmp_path, host=host))
    assert "--host" in line and "scheme" in line


def test_run_into_a_path_under_a_file_or_an_existing_run_is_refused(
    paths: dict[str, Path], tmp_path: Path
) -> None:
    assert "afile" in one_line("run", *run_args(paths["good"], tmp_path, out="afile/run"))
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "run.json").write_text("{}")
    assert "already holds a run" in one_line("run", *run_args(paths["good"], tmp_path, out="done"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_run_with_an_unreadable_scenario_names_it(paths: dict[str, Path], tmp_path: Path) -> None:
    p = paths["good"]
    p.chmod(0)
    try:
        assert str(p) in one_line("run", *run_args(p, tmp_path))
    finally:
        p.chmod(0o644)


# --- compare -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "missing",
        "empty_dir",
        "foreign_dir",
        "junk_run_json",
        "alien_run_json",
        "no_records",
        "binary",
        "dangling",
    ],
)
def test_compare_with_a_bad_run_dir_names_it(
    paths: dict[str, Path], tmp_path: Path, name: str
) -> None:
    line = one_line("compare", str(paths[name]), "--out", str(tmp_path / "rep"), "--no-html")
    assert str(paths[name]) in line
    assert not (tmp_path / "rep").exists()


def test_compare_into_a_path_under_a_file_is_refused(
    paths: dict[str, Path], tmp_path: Path
) -> None:
    line = one_line("compare", str(paths["empty_dir"]), "--out", str(paths["afile"] / "rep"))
    assert "--out" in line or "empty" in line  # either culprit, one line, exit 2


# --- inspect -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["missing", "empty_dir", "foreign_dir", "junk_run_json", "no_records", "binary", "dangling"],
)
def test_inspect_with_a_bad_source_names_it(paths: dict[str, Path], name: str) -> None:
    assert str(paths[name]) in one_line("inspect", str(paths[name]))


def test_inspect_with_a_missing_tokenizer_names_it(paths: dict[str, Path], tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    line = one_line("inspect", str(prompts), "--tokenizer", str(paths["missing"]))
    assert str(paths["missing"]) in line


# --- sweep ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["missing", "empty_dir", "binary", "dangling"])
def test_sweep_with_an_unusable_scenario_path_names_it(
    paths: dict[str, Path], tmp_path: Path, name: str
) -> None:
    line = one_line(
        "sweep",
        "--url",
        "http://127.0.0.1:9",
        "--label",
        "x",
        "--scenario",
        str(paths[name]),
        "--out",
        str(tmp_path / "sw"),
    )
    assert str(paths[name]) in line
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://127.0.0.1:21"])
def test_sweep_with_a_url_without_http_scheme_is_refused(
    paths: dict[str, Path], tmp_path: Path, url: str
) -> None:
    line = one_line(
        "sweep",
        "--url",
        url,
        "--label",
        "x",
        "--scenario",
        str(paths["good"]),
        "--out",
        str(tmp_path / "sw"),
    )
    assert "--url" in line and "scheme" in line


def test_sweep_into_a_path_under_a_file_is_refused(paths: dict[str, Path]) -> None:
    line = one_line(
        "sweep",
        "--url",
        "http://127.0.0.1:9",
        "--label",
        "x",
        "--scenario",
        str(paths["good"]),
        "--out",
        str(paths["afile"] / "sw"),
    )
    assert "--out" in line or "afile" in line


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ("run", "--host", "http://127.0.0.1:9", "--scenaro", "x.yaml", "--label", "a",
             "--out", "o"),
            "specload run: error: unknown option --scenaro (did you mean --scenario?)",
        ),
        (
            ("sweep", "--url", "http://127.0.0.1:9", "--max-eror-rate", "0.1", "--scenario", "s",
             "--out", "o"),
            "specload sweep: error: unknown option --max-eror-rate (did you mean "
            "--max-error-rate?)",
        ),
        (("compare", "a", "b", "--basline=x"),
         "specload compare: error: unknown option --basline (did you mean --baseline?)"),
        (("inspect", "x", "--zzzz"), "specload inspect: error: unknown option --zzzz (see "
         "specload inspect --help)"),
    ],
)  # fmt: skip
def test_a_misspelt_option_is_named_with_the_closest_one(argv: tuple[str, ...], line: str) -> None:
    assert one_line(*argv) == line


def test_an_interleaved_condition_without_a_server_is_named(paths: dict[str, Path]) -> None:
    line = one_line(
        "sweep", "--interleave", "--url", "baseline=http://127.0.0.1:9",
        "--url", "spec=http://127.0.0.1:9", "--condition", 'spce=--speculative-config {"a":1}',
        "--scenario", str(paths["good"]), "--out", str(paths["missing"] / "o"),
        "--skip-preflight",
    )  # fmt: skip
    assert "--condition spce has no server" in line and "(baseline, spec)" in line


def test_a_prompt_file_error_names_it_as_the_scenario_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One style for every file an error names: relative to where the user is."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my").mkdir()
    (tmp_path / "my" / "s.yaml").write_text(GOOD + "prompts:\n  file: p.jsonl\n")
    (tmp_path / "my" / "p.jsonl").write_text("{bad\n")
    line = one_line("run", "--host", "http://127.0.0.1:9", "--scenario", "my/s.yaml",
                    "--label", "a", "--out", "o")  # fmt: skip
    assert line.startswith("specload run: error: my/p.jsonl: line 1: not JSON"), line


@pytest.mark.parametrize("interleave", [True, False])
def test_a_sweep_that_cannot_reach_its_server_says_so_plainly_and_leaves_no_dir(
    paths: dict[str, Path], interleave: bool
) -> None:
    from specload.core.ports import free_port

    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    out = paths["missing"] / "sweep"
    urls = ["--interleave", "--url", f"baseline={refused}", "--url", f"spec={refused}"]
    target = urls if interleave else ["--url", refused, "--label", "x"]
    code, _, err = cli("sweep", *target, "--scenario", str(paths["good"]), "--out", str(out))
    assert code == 2 and err.count("\n") == 1, err
    assert err == (
        f"specload sweep: error: cannot reach {refused}/health: Connection refused (errno 111) "
        "(is the server up?)\n"
    )
    assert not paths["missing"].exists()  # nothing measured, nothing left
