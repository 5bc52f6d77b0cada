"""``specload locust``: Locust with specload's options loaded before Locust reads its command
line, so ``--help`` lists them (Locust's own ``locust -f FILE --help`` answers before it
imports the locustfile)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specload", *args], cwd=REPO, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_locust_help_through_specload_lists_specloads_options_beside_locusts() -> None:
    res = _cli("locust", "-f", "locustfiles/chat.py", "--help")
    assert res.returncode == 0, res.stderr[-2000:]
    for option in ("--scenario", "--max-regression", "--junit", "--baseline-run"):
        assert option in res.stdout, option  # specload's
    assert "--headless" in res.stdout and "--expect-workers" in res.stdout  # Locust's
    assert "MonkeyPatchWarning" not in res.stderr  # gevent patched before anything else


def test_specload_help_names_the_locust_command() -> None:
    res = _cli("--help")
    assert res.returncode == 0 and "locust" in res.stdout and "--help` lists them" in res.stdout
