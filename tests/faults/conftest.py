"""Fixtures of the fault matrix: raw-server processes, and one results row per test.

Set ``SPECLOAD_RELIABILITY_RESULTS=FILE`` and each matrix test appends its row (as JSON,
with ``passed``) to FILE when it ends; ``scripts/reliability_table.py`` does that and turns
the rows into ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, stop_process
from tests.faults.matrix import Row

RESULTS_ENV = "SPECLOAD_RELIABILITY_RESULTS"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.stash[_CALL_PASSED] = rep.passed


_CALL_PASSED = pytest.StashKey[bool]()


@pytest.fixture
def matrix_row(request: pytest.FixtureRequest) -> Iterator[Row]:
    """The test's row of the reliability table; written out when the test has run."""
    row = Row(fault="")
    yield row
    target = os.environ.get(RESULTS_ENV)
    if target and row.fault:
        passed = request.node.stash.get(_CALL_PASSED, False)
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**row.to_dict(), "test": request.node.nodeid,
                                 "passed": passed}) + "\n")


@dataclass
class RawProc:
    """A running ``tests/faults/rawserver.py`` process and its request log."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def expected(self) -> dict[str, str]:
        """``{X-Request-Id: expected outcome}`` for every chat request it received."""
        out = {}
        for line in self.log.read_text().splitlines():
            if line.startswith("REQ "):
                _, rid, expect = line.split(" ", 2)
                out[rid] = expect
        return out


@pytest.fixture
def raw_factory(tmp_path: Path) -> Iterator:
    started: list[RawProc] = []

    def factory(mode: str, *args: str) -> RawProc:
        log = tmp_path / f"raw-{mode}-{len(started)}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "tests.faults.rawserver", mode,
                                     *args], cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        deadline = time.time() + 20
        while not log.read_text().startswith("port "):
            assert proc.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.02)
        port = int(log.read_text().split()[1])
        raw = RawProc(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
        started.append(raw)
        return raw

    yield factory
    for raw in started:
        stop_process(raw.proc)
