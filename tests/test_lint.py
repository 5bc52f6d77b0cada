"""ruff and mypy are clean (the project's own configuration in pyproject.toml), so a change that
breaks either fails `make test` in CI, not just on a developer's machine that runs `make lint`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_is_clean() -> None:
    res = _tool("ruff", "check", "specload", "tests", "benchmarks", "scripts")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    res = _tool("mypy")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
