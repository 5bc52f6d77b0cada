"""Run the reliability tests and write ``docs/reliability.md`` from their results.

    python scripts/reliability_table.py [--out docs/reliability.md] [--rows ROWS.jsonl]
                                        [--suites-only]

The fault-matrix tests (``tests/faults/``) each append one JSON row (what was injected, how
the run ended, requests sent / recorded, records lost, error kinds, the compare report's
per-step error rates, whether the test passed) to the file named by
``SPECLOAD_RELIABILITY_RESULTS``; the other reliability suites (fuzzing, bad input, privacy,
web UI paths, dependencies) are counted from pytest's JUnit XML. The page is generated from
those results only, so it cannot drift from the tests. Exit 1 when any test failed (the page then says which).
With ``--rows`` the tests are not run; the table is rendered from an existing rows file.
With ``--suites-only`` only the suites run, and only their table in the existing page is
rendered anew (with a line saying so); the fault rows stay from the last full run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FAULTS = "tests/faults"
SUITES = {
    "tests/test_fuzz_scenario.py": "scenario YAML fuzzing (random, mutated, text) → one line, exit 2",
    "tests/client/test_sse_fuzz.py": "SSE byte streams split anywhere → the client never raises",
    "tests/test_cli_bad_input.py": "bad CLI input (paths, run dirs, --host) → one line, exit 2",
    "tests/test_privacy.py": "sentinels in prompts, key, output → absent from every file written",
    "tests/test_input_validation.py": "a broken line in a prompt file or trace, a baseline "
    "without records → one line naming file, line and what was expected, exit 2, no run dir, "
    "no request sent",
    "tests/locust/test_webui_paths.py": "web UI paths outside the --scenario folder or "
    "--runs-root, hidden options → HTTP 400, one line, the same whether the file exists; a UI "
    "open to the network without a login says so",
    "tests/test_dependencies.py": "every third-party import declared in pyproject.toml, tested "
    "ranges hold; a fresh venv with every extra runs each extra's code",
}
SUITES_HEADING = "## Bad input, fuzzing, privacy, exposure, dependencies"


def run_tests(rows: Path, junit: Path, paths: list[str]) -> int:
    env = {**os.environ, "SPECLOAD_RELIABILITY_RESULTS": str(rows)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        *paths,
    ]
    print("$ " + " ".join(cmd[2:]), flush=True)
    return subprocess.run(cmd, cwd=REPO, env=env, check=False).returncode


def suite_counts(junit: Path) -> dict[str, dict[str, int]]:
    """Per test file: passed / failed / skipped, from pytest's JUnit XML."""
    out: dict[str, dict[str, int]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        f = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        c = out.setdefault(f, {"passed": 0, "failed": 0, "skipped": 0})
        tags = {child.tag for child in case}
        key = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        c[key] += 1
    return out


def _kinds(row: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in row["kinds"].items()) or "-"


def _rates(row: dict[str, Any]) -> str:
    return ", ".join(f"{q} qps: {100 * e:.0f} %" for q, e in row["report_error_rates"].items())


def fault_table(rows: list[dict[str, Any]]) -> list[str]:
    head = (
        "| fault | injected | what the run did | requests sent / recorded | records lost "
        "| error rate per step (compare) | test |"
    )
    lines = [head, "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        exit_code = "" if r["exit_code"] is None else f", exit {r['exit_code']}"  # in-process
        did = f"{r['status']}{exit_code}; {_kinds(r)}"
        sent = f"{r['sent']} / {r['recorded']}"
        if r.get("server_saw") is not None:
            sent += f" (server saw {r['server_saw']})"
        lost = str(r["lost"]) + (f" ({r['note']})" if r.get("note") else "")
        verdict = "pass" if r["passed"] else "**FAIL**"
        name = r["test"].split("::", 1)[1]
        lines.append(
            f"| {r['fault']} | {r['injected']} | {did} | {sent} | {lost} | "
            f"{_rates(r)} | {verdict} `{name}` |"
        )
    return lines


def _commit() -> str:
    return (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            text=True,
            capture_output=True,
            check=False,
        ).stdout.strip()
        or "?"
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def suite_table(suites: dict[str, dict[str, int]]) -> list[str]:
    """The suites' heading and table: one row per file, counted from JUnit XML."""
    out = [SUITES_HEADING, "", "| suite | checks | passed | failed |", "| --- | --- | --- | --- |"]
    for f, what in SUITES.items():
        c = suites.get(f, {"passed": 0, "failed": 0})
        out.append(f"| `{f}` | {what} | {c['passed']} | {c['failed']} |")
    return out


def replace_suites(page: str, suites: dict[str, dict[str, int]], rc: int) -> str:
    """``page`` with its suites section (heading to the ``Fault matrix:`` line) rendered anew
    from a run of the suites alone; the fault rows and the page's own stamp stay as they were,
    and a line says when the suites were run."""
    lines = page.split("\n")
    start = next(i for i, x in enumerate(lines) if x.startswith("## Bad input"))
    end = next(i for i, x in enumerate(lines) if x.startswith("Fault matrix:"))
    note = (
        f"Suites run again alone {_now()} at commit `{_commit()}` (pytest exit {rc}, "
        "`--suites-only`); the fault rows above are from the run named at the top."
    )
    return "\n".join([*lines[:start], *suite_table(suites), "", note, "", *lines[end:]])


def render(rows: list[dict[str, Any]], suites: dict[str, dict[str, int]], rc: int | None) -> str:
    commit, when = _commit(), _now()
    what = (
        f"Generated {when} at commit `{commit}` from the test results "
        f"({'pytest exit ' + str(rc) if rc is not None else 'a saved rows file'}). "
        f"Each fault row is a test in `{FAULTS}/` that runs a headless `specload run` (or a "
        "Locust master with worker processes) against a real server process on 127.0.0.1 "
        "(the simulator with its fault switches, or `tests/faults/rawserver.py` where the "
        "simulator cannot misbehave enough; the network-namespace row puts master, server "
        "and workers on real addresses joined by veth links, `tests/faults/netlab.py`), then "
        "checks: every request sent has exactly one record with the right `error.kind` "
        "(held against the server's own log of what it did, where it has one); records on "
        "disk when the fault hit are still there, byte for byte; run.json says how the run "
        "ended; `specload compare` shows each step's error rate and kinds. Rows without an "
        "exit code are in-process checks of the one code path that decides, where the fault "
        "cannot be made real on a test box (a power cut, two vLLM engines, a wall-clock step)."
    )
    lost = (
        "Runs are short (mostly two steps, 4 and 8 req/s, about a second each), so counts "
        'are small. "records lost" is requests sent (or seen by the server) without a '
        "record: 0 wherever a process of specload survives the fault; a SIGKILLed process "
        "takes what it had not yet handed on, and the run directory says so. Regenerate "
        "with `make reliability-table`."
    )
    elsewhere = (
        "Narrower versions of some rows are also proved elsewhere: the client against "
        "scripted sockets (`tests/client/test_stream_client.py`), the simulator's fault "
        "switches (`tests/sim/test_faults.py`), SIGTERM to a separate Locust master "
        "(`tests/locust/test_locust_e2e.py`), a worker lost in the web UI "
        "(`tests/locust/test_webui_distributed.py`), a partial trailing line in "
        "requests.jsonl (`tests/test_recorder.py`)."
    )
    out = [
        "# Reliability: faults, bad input, interruption, privacy",
        "",
        "<!-- generated by scripts/reliability_table.py (make reliability-table); do not edit -->",
        "",
        what,
        "",
        lost,
        "",
        elsewhere,
        "",
        *fault_table(rows),
        "",
        *suite_table(suites),
    ]
    faults = suites.get(f"{FAULTS}/test_matrix.py", {"passed": 0, "failed": 0})
    out += ["", f"Fault matrix: {faults['passed']} passed, {faults['failed']} failed.", ""]
    return "\n".join(out)


def suites_only(out: Path) -> int:
    """Run the suites alone and put their table into the existing page."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        rc = run_tests(Path(tmp) / "rows.jsonl", junit, list(SUITES))
        suites = suite_counts(junit) if junit.exists() else {}
    out.write_text(replace_suites(out.read_text(), suites, rc))
    print(f"wrote the suites of {out} (pytest exit {rc})")
    return 1 if rc else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "docs" / "reliability.md")
    p.add_argument("--rows", type=Path, help="render from this rows file; run no tests")
    p.add_argument(
        "--suites-only",
        action="store_true",
        help="run only the bad-input/fuzzing/privacy/exposure/dependency suites and replace "
        "their table in the existing page (the fault matrix takes long and wants quiet cores)",
    )
    args = p.parse_args(argv)
    if args.suites_only:
        return suites_only(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        rows_path, junit = args.rows or Path(tmp) / "rows.jsonl", Path(tmp) / "junit.xml"
        rc = None if args.rows else run_tests(rows_path, junit, [FAULTS, *SUITES])
        rows = [json.loads(x) for x in rows_path.read_text().splitlines() if x.strip()]
        suites = suite_counts(junit) if junit.exists() else {}
    args.out.write_text(render(rows, suites, rc) + "\n")
    print(f"wrote {args.out} ({len(rows)} fault rows)")
    failed = [r["test"] for r in rows if not r["passed"]]
    return 1 if rc or failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
