"""The specload tab in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright, a real ``locust -f locustfiles/chat.py`` web UI, a real ``specload sim``.

The test acts as a user: it fills Locust's start form (host, and the scenario and run
directory under "Custom parameters"), presses Start, opens the specload tab, and reads the
table. The figures must be the run's own: the request counts and the TTFT/TPOT/E2E medians
shown equal what the run directory's records give, and the acceptance rate comes from the
simulator's ``/metrics``. The screenshot is kept under ``test-artifacts/``.

The run's states in between (warm-up, running) last a second or two each and belong to the
run's clock, not the test's: the test waits only for states that last (every step done, the
run completed) and checks every table the page drew on the way, as the page itself recorded
them: steps move forward only, and no step ever showed more requests than its records hold.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from specload.recorder import read_run
from tests.browser import artifact_path, chromium_page, poll_page
from tests.conftest import REPO, free_port, stop_process, wait_http

SPEC = '{"method":"draft_model","model":"draft","num_speculative_tokens":4,"synthetic_acceptance_rates":[0.8,0.5,0.3,0.1]}'
SCENARIO = """\
name: webui-browser
max_tokens: 32
steps: [3, 6]
step_duration_s: 3
warmup_s: 1
arrival: constant
max_concurrency: 8
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic: {input_tokens: 32, count: 20}
"""
ROWS_JS = """() => Array.from(document.querySelectorAll('table tr'))
  .map(tr => Array.from(tr.children).map(td => td.innerText.trim()))"""
#: Before any page script runs: keep every distinct specload step table the page draws (its
#: rows, as ROWS_JS reads them), so the test sees the states it could not wait for.
HISTORY_JS = """window.__tables = [];
new MutationObserver(() => {
  const rows = Array.from(document.querySelectorAll('table tr'))
    .map(tr => Array.from(tr.children).map(td => td.innerText.trim()));
  if (rows.length < 2 || !rows[0].includes('State')) return;
  const last = window.__tables[window.__tables.length - 1];
  if (JSON.stringify(last) !== JSON.stringify(rows)) window.__tables.push(rows);
}).observe(document, {subtree: true, childList: true, characterData: true});"""
STATES = ("next", "warm-up", "running", "done")


def _rows(rows: list[list[str]]) -> list[dict[str, str]]:
    """A table read by ROWS_JS as ``{column title: cell}`` rows."""
    if len(rows) < 2:
        return []
    head = [h.replace("\n", " ") for h in rows[0]]
    return [dict(zip(head, r, strict=False)) for r in rows[1:]]


def _table(page: Any) -> list[dict[str, str]]:
    """The visible table as ``{column title: cell}`` rows."""
    return _rows(page.evaluate(ROWS_JS))


def _p50(values: list[float]) -> float:
    s = sorted(values)
    k = (len(s) - 1) * 0.5
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _poll(page: Any, cond: Any, what: str, log: Path, timeout_s: float = 60.0) -> Any:
    return poll_page(
        page, cond, what, log, timeout_s=timeout_s, shot="webui-specload-tab-failed.png"
    )


def _live(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/specload/live.json", timeout=10) as r:
        return dict(json.load(r))


def _start_from_the_form(page: Any, url: str, host: str, scenario: Path, run_dir: Path) -> None:
    page.goto(url + "/")
    page.fill("input[name=host]", host)
    page.get_by_role("button", name="Custom parameters").click()
    page.fill("input[name=scenario]", str(scenario))
    page.fill("input[name=label]", "ui")
    page.fill("input[name=runDir]", str(run_dir))
    page.get_by_role("button", name="Start").click()
    page.get_by_role("tab", name="specload", exact=True).click()


@pytest.mark.slow
def test_run_started_from_the_ui_shows_per_step_figures_from_the_records(
    sim_factory, tmp_path: Path
) -> None:
    sim = sim_factory("--profile", "tiny", "--speculative-config", SPEC)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    run_dir = tmp_path / "runs" / "ui"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "locust.log"
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        "locustfiles/chat.py",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(port),
        # the form may name scenarios beside this one and run dirs under the runs root only
        # (a scenario given at start-up is checked at once, with its target)
        "--host",
        sim.url,
        "--scenario",
        str(scenario),
        "--runs-root",
        str(run_dir.parent),
    ]
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_http(url + "/", proc=proc)
        with chromium_page(width=1600, height=900) as (page, errors):
            page.add_init_script(HISTORY_JS)
            _start_from_the_form(page, url, sim.url, scenario, run_dir)
            page.evaluate("() => { window.__notReloaded = true; }")
            # the page refreshes by itself: the run ends and every step is done, no reload
            done = _poll(
                page,
                lambda: (t := _table(page)) and all(r["State"] == "done" for r in t) and t,
                "all steps done",
                log,
            )
            _poll(page, lambda: _live(url)["run"]["status"] == "completed", "completion", log)
            assert page.evaluate("() => window.__notReloaded === true")
            drawn = [_rows(rows) for rows in page.evaluate("() => window.__tables")]
            page.reload()  # Locust stops polling when the run ends: show the final figures
            final = _poll(
                page,
                lambda: (t := _table(page)) and all(r["Acceptance %"] != "-" for r in t) and t,
                "final table",
                log,
            )
            page.screenshot(path=str(artifact_path("webui-specload-tab.png")), full_page=True)
            page.get_by_role("tab", name="specload run", exact=True).click()
            run_tab = _poll(
                page,
                lambda: (
                    {r["What"]: r["Value"] for r in _table(page)}
                    if "What" in page.evaluate(ROWS_JS)[0]
                    else None
                ),
                "run tab",
                log,
            )
            # Locust's own Statistics tab: each request counts once in the Aggregated row
            page.get_by_role("tab", name="Statistics", exact=True).click()
            stats = _poll(
                page,
                lambda: (t := _table(page)) and any(r.get("Name") == "Aggregated" for r in t) and t,
                "statistics table",
                log,
            )
            page.screenshot(path=str(artifact_path("webui-statistics-tab.png")), full_page=True)
            assert not errors, errors
    finally:
        stop_process(proc)

    assert len(done) == 2
    records = list(read_run(run_dir).record_dicts())
    assert records and all(r["ok"] for r in records)
    # every table drawn before the reload: steps only move forward (next, warm-up, running,
    # done), and a step's live count never exceeds its records
    assert drawn and all(row["State"] == "done" for row in drawn[-1]), drawn
    for i in range(2):
        seen = [t[i] for t in drawn if len(t) == 2]
        states = [STATES.index(row["State"]) for row in seen]
        assert states == sorted(states), [row["State"] for row in seen]
        counted = [
            int(row["Records (incl. warm-up)"])
            for row in seen
            if row["Records (incl. warm-up)"].isdigit()
        ]
        assert max(counted) <= sum(1 for r in records if r["step"] == i), counted
    for i, row in enumerate(final):
        mine = [r for r in records if r["step"] == i]
        measured = [r for r in mine if not r["warmup"]]
        assert row["Step"] == f"{i + 1}/2 (r0)" and row["Target QPS"] == ("3", "6")[i]
        assert int(row["Records (incl. warm-up)"]) == len(mine) > 0 and row["Errors"] == "0"
        for col, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")):
            assert row[f"{col} p50 ms"] == f"{_p50([r[key] for r in measured]) * 1000:.2f}", col
        assert float(row["Achieved QPS"]) > 0
        assert 0 < float(row["Acceptance %"]) <= 100  # from the simulator's /metrics
        assert float(row["Tokens/chunk"]) >= 1
    assert run_tab["status"] == "completed"
    by_type: dict[str, int] = {}
    for r in stats:
        if r.get("Name") != "Aggregated":
            by_type[r["Type"]] = by_type.get(r["Type"], 0) + int(r["# Requests"])
    aggregated = next(int(r["# Requests"]) for r in stats if r.get("Name") == "Aggregated")
    assert set(by_type) == {"E2E", "TTFT", "TPOT"}, by_type
    assert aggregated == by_type["E2E"] == len(records), (aggregated, by_type)
    assert run_tab["requests sent / recorded"] == f"{len(records)} / {len(records)}"
    assert artifact_path("webui-specload-tab.png").stat().st_size > 10_000
