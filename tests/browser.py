"""Headless Chromium for browser tests: Debian's ``chromium`` driven by Playwright (shared helper).

Playwright's own browser download is not used: the system browser is installed with
``apt-get install -y chromium`` when missing (the test machines are root with package
access). ``chromium_page()`` yields a page and the list of console errors / page errors seen
so far, so a test can assert there were none; it closes everything on every path.
Screenshots go under ``test-artifacts/`` (gitignored) so CI can keep them.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def ensure_chromium() -> str:
    """Path of the system Chromium, installing the Debian package when it is missing.

    Parallel test workers may all find it missing: one installs under a file lock while the
    others wait and then find it there (two apt-gets at once fail on dpkg's lock), and apt
    waits for any other holder of dpkg's lock instead of failing."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if shutil.which("apt-get") is None:
        pytest.fail("chromium is missing and apt-get is not available to install it")
    with open(Path(tempfile.gettempdir()) / "specload-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if Path(CHROMIUM).exists():
            return CHROMIUM
        proc = subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "chromium"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if proc.returncode != 0 or not Path(CHROMIUM).exists():
        pytest.fail(f"apt-get install -y chromium failed: {proc.stderr.strip()[-500:]}")
    return CHROMIUM


def artifact_path(name: str) -> Path:
    """A path under test-artifacts/ for a screenshot or a saved page."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[tuple[Any, list[str]]]:
    """A fresh page in headless Chromium and the console/page errors it reports."""
    sync_api = pytest.importorskip("playwright.sync_api")
    exe = ensure_chromium()
    errors: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on(
                "console",
                lambda msg: (
                    errors.append(f"console {msg.type}: {msg.text}")
                    if msg.type == "error"
                    else None
                ),
            )
            page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
            yield page, errors
        finally:
            browser.close()


def poll_page(
    page: Any, cond: Any, what: str, log: Path, *, timeout_s: float = 60.0, shot: str
) -> Any:
    """``cond()``'s first truthy value, polled every 0.25 s; on timeout a full-page screenshot
    (``shot`` under test-artifacts/) and an AssertionError with the tail of ``log``."""
    import time

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        page.wait_for_timeout(250)
    page.screenshot(path=str(artifact_path(shot)), full_page=True)
    raise AssertionError(f"{what} not within {timeout_s} s; log:\n{log.read_text()[-3000:]}")
