"""The specload JSON endpoint is one of Locust's pages: open without ``--web-login``, behind
the login with it (a real ``locust`` process; Locust's documented way to configure auth)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import free_port, stop_process, wait_http

LOCUSTFILE = """\
from locust import events

from specload.locust import ChatUser, StepShape, install

__all__ = ["ChatUser", "StepShape"]

install()


@events.init.add_listener
def _auth(environment, web_ui=None, **_kw):
    if web_ui is not None and web_ui.web_login:  # a login nobody passes: pages redirect
        web_ui.app.config["SECRET_KEY"] = "test-only"
        web_ui._login_manager.user_loader(lambda user_id: None)
"""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def _status(url: str) -> tuple[int, str, bytes]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=10) as r:
            return r.status, r.headers.get("Location", ""), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Location", ""), b""


def _locust(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    (tmp_path / "lf.py").write_text(LOCUSTFILE)
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "lf.py",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        *extra,
    ]
    with open(tmp_path / "locust.log", "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, f"http://127.0.0.1:{port}"


def test_live_json_needs_the_login_when_locust_asks_for_one(tmp_path: Path) -> None:
    proc, url = _locust(tmp_path, "--web-login")
    try:
        wait_http(url + "/login", proc=proc)
        code, location, _ = _status(url + "/specload/live.json")
        home, _, _ = _status(url + "/")
    finally:
        stop_process(proc)
    assert home == 302  # Locust's own page, same rule
    assert code == 302 and "/login" in location, (code, location)


def test_live_json_before_any_run_says_so(tmp_path: Path) -> None:
    proc, url = _locust(tmp_path)
    try:
        wait_http(url + "/", proc=proc)
        code, _, body = _status(url + "/specload/live.json")
    finally:
        stop_process(proc)
    assert code == 200
    view = json.loads(body)
    assert view["run"] is None and view["steps"] == []
