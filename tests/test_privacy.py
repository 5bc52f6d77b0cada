"""Nothing a user sent or received, and never the API key, lands in a file unless asked.

Sentinel strings go into the prompts (a JSONL prompt file), the API key (``--api-key`` in
one run, ``OPENAI_API_KEY`` in the other) and the server's output (the raw server streams
a text holding a sentinel). Then every file the run and ``specload compare`` wrote (Locust's
log included), and everything the commands printed, is scanned. With ``--store-text`` the
prompt and output text appear in the records; the key still appears nowhere. The server's
log of ``Authorization`` digests proves the key really was sent. No command line of the run's
processes holds the key or a prompt: every Python process of the run loads a hook
(``sitecustomize`` on ``PYTHONPATH``) that writes down its own command line when it starts
and every command line it gives a child when it spawns one, so even a child that lives a
millisecond is in the log (a poll of ``ps`` can miss it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import stop_process
from tests.faults.matrix import RawProc, start_raw

PROMPT_SENTINEL = "PROMPTSENTINEL7f3a9c"
OUTPUT_SENTINEL = "OUTPUTSENTINEL2b8e41"
KEY_SENTINEL = "sk-KEYSENTINEL5d0c77"


#: Where the hook below writes (an environment variable every process of the run inherits).
ARGV_LOG_ENV = "SPECLOAD_TEST_ARGV_LOG"
#: ``sitecustomize``: this process's command line at start-up, then every command line it
#: gives a child (the interpreter's audit events for exec, spawn, ``subprocess``, ``system``),
#: one JSON line each. A parent writes before its child exists: nothing is too short-lived.
ARGV_HOOK = """\
import json, os, sys

_LOG = os.environ.get("SPECLOAD_TEST_ARGV_LOG")


def _write(kind, argv):
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    words = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
    with open(_LOG, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "kind": kind, "argv": words}) + "\\n")


def _audit(event, args):
    if event in ("os.exec", "os.posix_spawn"):
        _write("child", [args[0], *args[1]])
    elif event == "os.spawn":
        _write("child", [args[1], *args[2]])
    elif event == "subprocess.Popen":  # (executable, args, cwd, env); args may be one string
        given = args[1]
        _write("child", [args[0] or "", *([given] if isinstance(given, (str, bytes)) else given)])
    elif event == "os.system":
        _write("child", [args[0]])


if _LOG:
    _write("start", sys.orig_argv)
    sys.addaudithook(_audit)
"""


def argv_hook_env(tmp: Path, name: str) -> tuple[dict[str, str], Path]:
    """The environment that loads ``ARGV_HOOK`` into every Python process of a run, and the
    log it writes (outside every folder the run and compare write)."""
    hook = tmp / "argv-hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(ARGV_HOOK)
    log = tmp / f"argv-{name}.jsonl"
    path = os.pathsep.join(x for x in (str(hook), os.environ.get("PYTHONPATH")) if x)
    return {"PYTHONPATH": path, ARGV_LOG_ENV: str(log)}, log


def given_command_lines(log: Path, top: int) -> list[dict]:
    """What the run's processes were given: every entry of the log (``top``: written by
    ``specload run`` itself) but the command line typed for ``specload run`` (where
    ``--api-key`` is the user's own choice)."""
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    marked = [{**e, "top": e["pid"] == top} for e in entries]
    return [e for e in marked if not (e["top"] and e["kind"] == "start")]


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawProc]:
    server = start_raw(
        "text", "--text", f"the answer is {OUTPUT_SENTINEL} indeed", log_dir=tmp_path
    )
    yield server
    stop_process(server.proc)


def scenario(tmp: Path) -> Path:
    prompts = tmp / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps(
                {
                    "messages": [
                        {"role": "system", "content": "be brief"},
                        {"role": "user", "content": f"question {i}: what is {PROMPT_SENTINEL}?"},
                    ]
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    p = tmp / "privacy.yaml"
    p.write_text(
        "name: privacy\nmax_tokens: 8\nsteps: [4]\nstep_duration_s: 1\nwarmup_s: 0\n"
        "arrival: constant\nmax_concurrency: 4\nrequest_timeout_s: 5\n"
        "prompts: {file: prompts.jsonl}\n"
    )
    return p


def run(
    tmp: Path,
    host: str,
    out: str,
    *extra: str,
    env_key: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """``specload run``, and the command lines its processes were given (``ARGV_HOOK``)."""
    hook_env, log = argv_hook_env(tmp, out)
    env = {**os.environ, **hook_env}
    env.pop("OPENAI_API_KEY", None)
    if env_key:
        env["OPENAI_API_KEY"] = env_key
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "run",
        "--host",
        host,
        "--scenario",
        str(scenario(tmp)),
        "--label",
        out,
        "--out",
        out,
        *extra,
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out_s, err_s = proc.communicate(timeout=120)
    res = subprocess.CompletedProcess(cmd, proc.returncode, out_s, err_s)
    assert res.returncode == 0, res.stderr[-2000:]
    return res, given_command_lines(log, proc.pid)


def assert_no_secret_on_a_command_line(given: list[dict]) -> None:
    """The hook saw the run start Locust (``specload run`` giving it its command line, and
    Locust's own process starting with it), and no command line holds the key or a prompt."""
    assert any(e["top"] and e["kind"] == "child" and "locust" in e["argv"] for e in given), given
    assert any(not e["top"] and e["kind"] == "start" and "locust" in e["argv"] for e in given)
    for needle in (KEY_SENTINEL, PROMPT_SENTINEL, OUTPUT_SENTINEL):
        assert not [e for e in given if any(needle in a for a in e["argv"])], needle


def compare(tmp: Path, *run_dirs: str) -> subprocess.CompletedProcess[str]:
    # the raw server sends each answer in one packet: TPOT is 0, so compare on TTFT
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "compare",
            *run_dirs,
            "--out",
            "report",
            "--bootstrap",
            "100",
            "--metric",
            "ttft_p50",
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def files_under(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*") if p.is_file())


def holders(paths: list[Path], needle: str) -> list[str]:
    return [str(p) for p in paths if needle.encode() in p.read_bytes()]


def test_no_prompt_output_or_key_in_any_file_without_store_text(
    tmp_path: Path, raw: RawProc
) -> None:
    run1, given1 = run(tmp_path, raw.url, "flag", "--api-key", KEY_SENTINEL)
    run2, given2 = run(tmp_path, raw.url, "env", env_key=KEY_SENTINEL)
    rep = compare(tmp_path, "flag", "env")
    digest = hashlib.sha256(f"Bearer {KEY_SENTINEL}".encode()).hexdigest()[:16]
    assert raw.auth_digests() == {digest}, "the key must have reached the server"
    assert len(raw.expected()) >= 8
    files = files_under(tmp_path / "flag", tmp_path / "env", tmp_path / "report")
    names = {p.name for p in files}
    assert {
        "run.json",
        "requests.jsonl",
        "locust.log",
        "report.md",
        "report.json",
        "report.html",
    } <= names, names
    records = [
        json.loads(x) for x in (tmp_path / "flag" / "requests.jsonl").read_text().splitlines()
    ]
    assert records and all(
        r["ok"] and r["prompt_sha256"] and r["output_sha256"] for r in records
    )  # the text was there, reduced to hashes
    printed = run1.stdout + run1.stderr + run2.stdout + run2.stderr + rep.stdout + rep.stderr
    for needle in (PROMPT_SENTINEL, OUTPUT_SENTINEL, KEY_SENTINEL):
        assert holders(files, needle) == [], needle
        assert needle not in printed, needle
    for given in (given1, given2):  # nothing visible in ps, ever
        assert_no_secret_on_a_command_line(given)


def test_store_text_writes_prompt_and_output_but_never_the_key(
    tmp_path: Path, raw: RawProc
) -> None:
    _, given = run(tmp_path, raw.url, "text", "--store-text", "--api-key", KEY_SENTINEL)
    assert_no_secret_on_a_command_line(given)  # stored text goes to files, never to argv
    rep = compare(tmp_path, "text")
    files = files_under(tmp_path / "text", tmp_path / "report")
    assert holders(files, PROMPT_SENTINEL) and holders(files, OUTPUT_SENTINEL)
    first = json.loads((tmp_path / "text" / "requests.jsonl").read_text().splitlines()[0])
    assert PROMPT_SENTINEL in first["prompt_text"] and OUTPUT_SENTINEL in first["output_text"]
    assert holders(files, KEY_SENTINEL) == []
    assert KEY_SENTINEL not in rep.stdout + rep.stderr
