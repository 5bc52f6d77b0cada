"""The specload JSON endpoint is one of Locust's pages: open without ``--web-login``, behind
the login with it (a real ``locust`` process; Locust's documented way to configure auth)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
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
        others = {
            p: _status(url + p)[:2]
            for p in ("/specload/plan.json", "/specload/runs.json", "/specload/report/report.html")
        }
    finally:
        stop_process(proc)
    assert home == 302  # Locust's own page, same rule
    assert code == 302 and "/login" in location, (code, location)
    for page in ("/specload/plan.json", "/specload/runs.json", "/specload/report/report.html"):
        assert others[page][0] == 302 and "/login" in others[page][1], (page, others[page])


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


def _post(url: str, fields: dict[str, str]) -> tuple[int, bytes]:
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_page_gets_the_panel_and_a_run_that_cannot_start_shows_a_banner(
    tmp_path: Path,
) -> None:
    """Locust's page carries specload's script; a bad baseline in the start form stops the
    run before any load, and the page says why (not only the master's log)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: b\nsteps: [3]\nprompts: {synthetic: {input_tokens: 8}}\n")
    proc, url = _locust(
        tmp_path, "--host", "http://127.0.0.1:9", "--scenario", str(scenario),
        "--runs-root", str(tmp_path),
    )  # fmt: skip
    try:
        wait_http(url + "/", proc=proc)
        _, _, home = _status(url + "/")
        js_code, _, js = _status(url + "/specload/static/specload-ui.js")
        plan = json.loads(_status(url + "/specload/plan.json")[2])
        early, _ = _post(url + "/specload/report", {})
        missing = tmp_path / "no-such-run"
        form = {"host": "http://127.0.0.1:9", "baseline_run": str(missing)}
        assert _post(url + "/swarm", form)[0] == 200
        deadline = time.time() + 20
        while time.time() < deadline:
            view = json.loads(_status(url + "/specload/live.json")[2])
            if view["banners"]:
                break
            time.sleep(0.2)
    finally:
        stop_process(proc)
    assert b"./specload/static/specload-ui.js" in home and js_code == 200 and b"specload" in js
    assert [s["target_qps"] for s in plan["steps"]] == [3.0] and plan["scenario"] == str(scenario)
    assert early == 409  # no finished run: nothing to report
    (banner,) = view["banners"]
    assert banner["kind"] == "error" and view["run"] is None
    assert banner["text"].startswith("the run could not start: ")
    assert "--baseline-run" in banner["text"] and "no-such-run: " in banner["text"]  # from cwd
