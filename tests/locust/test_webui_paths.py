"""The web UI names only the files its command line allows (``specload/locust/web_paths.py``).

A real ``locust`` master with its web UI on 127.0.0.1 (ports chosen at run time): the step
plan, the start form and hidden options are refused with HTTP 400 and one line for any path
outside the ``--scenario`` folder or ``--runs-root``, the same line whether the path exists
or not, and nothing is written outside. The open-to-the-network warning is checked in the
same process: the locustfile makes the UI's bind address look like every interface while
the plugin starts, then binds to 127.0.0.1 as the test asks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from specload.locust.web_paths import PathRefused, UiPaths, exposure_warning
from tests.conftest import free_port, stop_process, wait_http

SCENARIO = "name: p\nsteps: [3]\nprompts: {synthetic: {input_tokens: 8}}\n"
LOCUSTFILE = """\
from locust import events

from specload.locust import ChatUser, StepShape


@events.init.add_listener
def _looks_open(environment, web_ui=None, **_kw):
    if web_ui is not None:
        web_ui.host = ""  # as Locust's default: every interface


from specload.locust import install  # noqa: E402

install()


@events.init.add_listener
def _bind_loopback(environment, web_ui=None, **_kw):
    if web_ui is not None:
        web_ui.host = "127.0.0.1"  # the test itself never listens beyond loopback

__all__ = ["ChatUser", "StepShape"]
"""


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _post(url: str, fields: dict[str, str]) -> tuple[int, bytes]:
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _layout(tmp: Path) -> dict[str, Path]:
    """The scenario folder, the runs root, and a folder beside them with a valid scenario
    and a finished-looking run (outside: must be refused whether or not they exist)."""
    (tmp / "scen").mkdir()
    (tmp / "scen" / "s.yaml").write_text(SCENARIO)
    (tmp / "runs").mkdir()
    outside = tmp / "private"
    (outside / "run").mkdir(parents=True)
    (outside / "s.yaml").write_text(SCENARIO)
    (outside / "run" / "run.json").write_text(json.dumps({"label": "x", "status": "completed"}))
    (tmp / "scen" / "link.yaml").symlink_to(outside / "s.yaml")
    return {"outside": outside, "runs": tmp / "runs"}


def _master(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    (tmp / "lf.py").write_text(LOCUSTFILE)
    port = free_port()
    cmd = [
        sys.executable, "-m", "locust", "-f", "lf.py", "--web-host", "127.0.0.1",
        "--web-port", str(port), "--host", "http://127.0.0.1:9",
        "--scenario", "scen/s.yaml", "--runs-root", "runs", *extra,
    ]  # fmt: skip
    with open(tmp / "locust.log", "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, f"http://127.0.0.1:{port}"


def _plan(url: str, scenario: str) -> tuple[int, bytes]:
    return _get(url + "/specload/plan.json?scenario=" + urllib.parse.quote(scenario))


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


#: Locust's line when its Start begins a run (``locust.runners``, ``start_shape``), logged
#: inside the ``/swarm`` request before it answers; a second Start while one runs says
#: ``ONGOING`` instead.
SHAPE_STARTS = "Shape test starting."
ONGOING = "There is an ongoing shape test running"
#: The master's line when a run's pre-flight fails (``MasterSide._report``).
PREFLIGHT_FAILED = "specload: error: pre-flight: "


def _wait_for_line(log: Path, needle: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the master has written ``needle`` to its log, within a generous minute."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if needle in log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not in {log} (master exit code {proc.poll()})")


def _start_to_its_preflight(url: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
    """Start inside the folders against the closed port, and wait for its pre-flight to fail
    (no run dir is made): a start Locust began before it has left its lines by then."""
    code, body = _post(
        url + "/swarm",
        {"host": "http://127.0.0.1:9", "scenario": "scen/s.yaml", "run_dir": "runs/ok"},
    )
    assert code == 200 and json.loads(body)["success"], body
    _wait_for_line(log, PREFLIGHT_FAILED, proc)


def test_plan_start_and_hidden_options_refuse_paths_outside_with_one_line(
    tmp_path: Path,
) -> None:
    paths = _layout(tmp_path)
    outside = paths["outside"]
    before = _files_under(tmp_path)
    proc, url = _master(tmp_path)
    try:
        wait_http(url + "/", proc=proc)
        inside = _plan(url, "scen/s.yaml")
        refused = {
            name: _plan(url, p)
            for name, p in {
                "existing": str(outside / "s.yaml"),
                "missing": str(outside / "nope.yaml"),
                "dotdot": "scen/../private/s.yaml",
                "symlink": "scen/link.yaml",
                "system": "/etc/passwd",
            }.items()
        }
        runs = json.loads(_get(url + "/specload/runs.json")[1])
        host = {"host": "http://127.0.0.1:9"}
        starts = {
            name: _post(url + "/swarm", {**host, **form})
            for name, form in {
                "missing_inside": {"scenario": "scen/nope.yaml"},
                "scenario": {"scenario": str(outside / "s.yaml")},
                "run_dir": {"run_dir": str(outside / "new-run")},
                "label_escapes": {"label": "../../private/by-label"},
                "baseline_existing": {"baseline_run": str(outside / "run")},
                "baseline_missing": {"baseline_run": str(outside / "no-run")},
                "runs_root": {"runs_root": "/"},
                "scenario_set": {"scenario_set": '{"prompts.file": "/etc/passwd"}'},
            }.items()
        }
        kept = _get(url + "/specload/plan.json")  # the form was not applied: still scen/s.yaml
        view = json.loads(_get(url + "/specload/live.json")[1])
        _start_to_its_preflight(url, tmp_path / "locust.log", proc)
    finally:
        stop_process(proc)
    log = (tmp_path / "locust.log").read_text()
    assert inside[0] == 200 and json.loads(inside[1])["steps"], inside
    assert kept[0] == 200 and json.loads(kept[1])["scenario"] == "scen/s.yaml", kept
    bodies = {name: (code, json.loads(body)) for name, (code, body) in refused.items()}
    first = bodies["existing"]
    assert first[0] == 400 and set(first[1]) == {"error"}, first
    assert all(b == first for b in bodies.values()), bodies  # same for missing or existing
    line = first[1]["error"]
    assert "\n" not in line and "scen" in line and "passwd" not in line, line
    assert runs["root"] == "runs" and runs["runs"] == []
    missing = starts.pop("missing_inside")  # allowed folder, no such file: refused at once
    answer = json.loads(missing[1])
    assert missing[0] == 400 and answer["success"] is False, missing
    assert answer["message"].startswith("scen/nope.yaml: ") and "\n" not in answer["message"]
    for name, (code, body) in starts.items():
        answer = json.loads(body)
        assert code == 400 and answer["success"] is False, (name, code, answer)
        assert "\n" not in answer["message"] and "refused" in answer["message"], (name, answer)
    assert starts["baseline_existing"][1] == starts["baseline_missing"][1]
    assert "--runs-root runs" in json.loads(starts["run_dir"][1])["message"]
    assert view["run"] is None  # no run was started
    assert [b["text"] for b in view["banners"] if b["kind"] == "error"] == [
        "the run could not start: " + json.loads(starts["scenario_set"][1])["message"]
    ]
    written = _files_under(tmp_path) - before
    assert not {
        p for p in written if p.name not in ("lf.py", "locust.log") and "__pycache__" not in p.parts
    }
    assert "open to the network" in log  # the locustfile made it look unbound (module doc)
    # Locust began one run, the allowed start's, which ended at its pre-flight: none of the
    # refused starts reached Locust's Start, so no run of theirs could write anything later
    assert log.count(SHAPE_STARTS) == 1 and ONGOING not in log, log[-3000:]
    assert log.count("specload: error: ") == log.count(PREFLIGHT_FAILED) == 1, log[-3000:]


def test_a_start_inside_the_folders_runs_and_the_exposure_banner_shows(tmp_path: Path) -> None:
    """The allowed paths still work: the run starts (a target that refuses connections makes
    its pre-flight fail: the banner names the target, not a path), and the UI that looked
    open to the network says so in the banners from start-up on."""
    _layout(tmp_path)
    proc, url = _master(tmp_path)
    try:
        wait_http(url + "/", proc=proc)
        early = json.loads(_get(url + "/specload/live.json")[1])["banners"]
        code, body = _post(
            url + "/swarm",
            {"host": "http://127.0.0.1:9", "scenario": "scen/s.yaml", "run_dir": "runs/ok"},
        )
        deadline = time.time() + 20
        while time.time() < deadline:
            banners = json.loads(_get(url + "/specload/live.json")[1])["banners"]
            if any(b["kind"] == "error" for b in banners):
                break
            time.sleep(0.2)
    finally:
        stop_process(proc)
    assert code == 200 and json.loads(body)["success"], body
    assert [b["kind"] for b in early] == ["warning"] and "open to the network" in early[0]["text"]
    errors = [b["text"] for b in banners if b["kind"] == "error"]
    assert errors and errors[0].startswith("the run could not start: pre-flight: "), errors


# --- the rules, in-process ------------------------------------------------------------------
class _Opts:
    def __init__(self, **kw: str) -> None:
        self.__dict__.update(kw)


def test_rules_from_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rules = UiPaths.from_options(
        _Opts(scenario="scen/s.yaml", run_dir="/elsewhere/r", runs_root="runs", baseline_run="")
    )
    rules.scenario("scen/s.yaml")
    rules.scenario(str(tmp_path / "scen" / "deeper" / "t.yaml"))
    rules.run_dir("/elsewhere/r")  # the command line's own, wherever it is
    rules.run_dir("runs/x")
    rules.baseline("runs/sweep/baseline")
    for check, path in (
        (rules.scenario, "other/s.yaml"),
        (rules.scenario, "scen/../other/s.yaml"),
        (rules.run_dir, "/elsewhere/r2"),
        (rules.run_dir, "runs/../x"),
        (rules.run_dir, "runsx/y"),  # a prefix is not a folder
        (rules.baseline, "/tmp"),
    ):
        with pytest.raises(PathRefused):
            check(path)
    with pytest.raises(PathRefused, match="^run_dir: refused"):
        rules.check({"label": "../up", "runs_root": "runs"})
    no_scenario = UiPaths.from_options(_Opts())
    no_scenario.scenario("scenarios/low.yaml")
    assert no_scenario.default_run_dir("b") == "runs/b"


@pytest.mark.parametrize(
    ("host", "login", "warns"),
    [
        ("", False, True),
        ("0.0.0.0", False, True),
        ("10.1.2.3", False, True),
        ("myhost", False, True),
        ("", True, False),
        ("127.0.0.1", False, False),
        ("localhost", False, False),
        ("::1", False, False),
        ("::ffff:127.0.0.1", False, False),
    ],
)
def test_exposure_warning(host: str, login: bool, warns: bool) -> None:
    line = exposure_warning(host, 8089, login)
    assert (line is not None) == warns
    if line:
        assert "\n" not in line and ":8089" in line and "--web-login" in line
