"""Fixtures of the fault matrix: raw-server processes, and one results row per test.

Set ``SPECLOAD_RELIABILITY_RESULTS=FILE`` and each matrix test appends its row (as JSON,
with ``passed``) to FILE when it ends; ``scripts/reliability_table.py`` does that and turns
the rows into ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import stop_process
from tests.faults.matrix import RawProc, Row, start_raw

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
            fh.write(
                json.dumps({**row.to_dict(), "test": request.node.nodeid, "passed": passed}) + "\n"
            )


@pytest.fixture
def raw_factory(tmp_path: Path) -> Iterator:
    started: list[RawProc] = []

    def factory(mode: str, *args: str) -> RawProc:
        raw = start_raw(mode, *args, log_dir=tmp_path)
        started.append(raw)
        return raw

    yield factory
    for raw in started:
        stop_process(raw.proc)
