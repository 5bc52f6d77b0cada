"""The web UI answers live against a baseline run: headless Chromium, a real Locust web UI
started with ``--baseline-run``, real simulators (baseline and speculative) on loopback.

One module-scoped setup makes the baseline run (``specload run``) and starts the web UI for
the speculative condition. The first test acts as a user: reads the step plan on the start
form, presses Start, opens the specload tab and watches the ratio cells, the provisional
verdict and the charts grow step by step, then the final answer. The second presses Report
and fetches ``report.html``; the figures the page showed must be ``specload compare``'s own
on the same two run dirs. Screenshots go to ``test-artifacts/`` (docs/web-ui.md shows them).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from specload.analysis.statistics.stats import Estimate
from specload.report.wording import signed_change
from tests.browser import artifact_path, chromium_page, poll_page
from tests.conftest import REPO, free_port, specload_run, start_sim, stop_process, wait_http

SPEC = (
    '{"method":"draft_model","model":"draft","num_speculative_tokens":4,'
    '"synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'
)
SCENARIO = """\
name: webui-compare
max_tokens: 48
min_tokens: 48
ignore_eos: true
steps: [4, 8, 24]
step_duration_s: 4
warmup_s: 0.5
arrival: constant
max_concurrency: 64
metrics_interval_s: 1
request_timeout_s: 20
prompts:
  synthetic: {input_tokens: 64, count: 30}
"""
PROFILE = "h200-llama8b"

pytestmark = pytest.mark.slow


@dataclass
class Ui:
    url: str
    baseline: Path
    run_dir: Path
    log: Path


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return dict(json.load(r))


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    tmp = tmp_path_factory.mktemp("webui-compare")
    scenario = tmp / "s.yaml"
    scenario.write_text(SCENARIO)
    base_sim = start_sim("--profile", PROFILE, log_dir=tmp)
    try:
        specload_run(base_sim.url, scenario, "baseline", tmp / "runs" / "baseline")
    finally:
        base_sim.stop()
    sim = start_sim("--profile", PROFILE, "--speculative-config", SPEC, log_dir=tmp)
    port = free_port()
    log = tmp / "locust.log"
    # run from tmp with relative paths, as a user runs it from their project folder
    cmd = [
        sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"),
        "--web-host", "127.0.0.1", "--web-port", str(port), "--host", sim.url,
        "--scenario", "s.yaml", "--label", "spec", "--run-dir", "runs/spec",
        "--baseline-run", "runs/baseline",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc=proc)
        yield Ui(f"http://127.0.0.1:{port}", tmp / "runs" / "baseline", tmp / "runs" / "spec", log)
    finally:
        stop_process(proc)
        sim.stop()


def _poll(page: Any, cond: Any, what: str, ui: Ui, timeout_s: float = 90.0) -> Any:
    return poll_page(page, cond, what, ui.log, timeout_s=timeout_s, shot="webui-compare-failed.png")


#: What the specload panel shows: tag, verdict, ratio rows, chart dots, clock line.
PANEL_JS = """() => {
  const t = (id) => { const n = document.querySelector(`[data-testid="${id}"]`);
                      return n ? n.textContent : null; };
  const rows = Array.from(document.querySelectorAll('[data-testid="specload-ratios"] tbody tr'))
    .map(tr => Array.from(tr.children).map(td => td.textContent));
  const dots = (id) => document.querySelectorAll(
    `[data-testid="${id}"] circle[data-series="this run p50"]`).length;
  return {tag: t("specload-verdict-tag"), verdict: t("specload-verdict-text"),
          clock: t("specload-clock"), rows, tpot_dots: dots("specload-chart-tpot"),
          ttft_dots: dots("specload-chart-ttft"),
          base_dots: document.querySelectorAll(
            '[data-testid="specload-chart-tpot"] circle[data-series="baseline p50"]').length,
          qps_dots: document.querySelectorAll(
            '[data-testid="specload-chart-qps"] circle[data-series="achieved"]').length};
}"""

#: Every panel state the page renders, kept in the page (``window.__seen``): a step's
#: provisional answer can last less than one of the page's 2-s polls of live.json, so a test
#: polling from outside may miss a state the page did show, or the page may skip it.
RECORD_JS = (
    "window.__seen = []; const snap = "
    + PANEL_JS
    + """;
new MutationObserver(() => {
  const p = snap(), last = window.__seen[window.__seen.length - 1];
  if (p.tag && (!last || last.tag !== p.tag || last.rows.length !== p.rows.length))
    window.__seen.push(p);
}).observe(document, {subtree: true, childList: true, characterData: true});"""
)


def _panel(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(PANEL_JS))


def _start(page: Any, ui: Ui) -> None:
    page.goto(ui.url + "/")
    plan = page.get_by_test_id("specload-plan")
    plan.wait_for(timeout=15_000)
    _poll(page, lambda: "3 steps" in plan.inner_text(), "the step plan", ui, 15)
    text = plan.inner_text()
    assert "user pool is the scenario's max_concurrency" in text
    assert "3 steps, constant arrivals, up to 64 requests in flight" in text
    rows = page.locator('[data-testid="specload-plan"] tbody tr').all_inner_texts()
    assert [r.split("\t")[1] for r in rows] == ["4", "8", "24"], rows
    page.screenshot(path=str(artifact_path("webui-start-form.png")), full_page=True)
    page.get_by_role("button", name="Start").click()
    page.get_by_role("tab", name="specload", exact=True).click()


def _finished(ui: Ui) -> bool:
    v = _get(ui.url + "/specload/live.json")
    return bool(
        v["run"] and v["run"]["finished"] and v["compare"] and not v["compare"]["provisional"]
    )


def test_ratios_verdict_and_charts_grow_step_by_step(ui: Ui) -> None:
    with chromium_page(width=1400, height=1100) as (page, errors):
        page.add_init_script(RECORD_JS)
        _start(page, ui)
        clock = _poll(page, lambda: (c := _panel(page)["clock"]) and "Step" in c and c, "", ui)
        assert " of 3 · " in clock and "left in this step" in clock and "left in the run" in clock
        page.screenshot(path=str(artifact_path("webui-compare-provisional.png")), full_page=True)
        _poll(page, lambda: _finished(ui), "the final comparison", ui)
        final = _poll(page, lambda: (p := _panel(page))["tag"].startswith("FINAL") and p, "", ui)
        assert len(final["rows"]) == 3 and final["tpot_dots"] == 3 and final["ttft_dots"] == 3
        assert final["clock"].startswith("Run completed: ")
        effects = page.locator('[data-testid="specload-ratios"] td[data-effect]').evaluate_all(
            "cells => cells.map(c => c.dataset.effect)"
        )
        assert len(effects) == 12 and set(effects) <= {"helps", "hurts", "same", "undecided"}
        page.screenshot(path=str(artifact_path("webui-compare-final.png")), full_page=True)
        seen = page.evaluate("window.__seen")
        assert not errors, errors
    # the answer grew a step at a time and never shrank: each provisional state the page
    # rendered has as many rows as its tag counts steps, and charts that far along
    print("states the page showed:", [p["tag"] for p in seen])
    counts = [len(p["rows"]) for p in seen]
    assert counts == sorted(counts) and counts[-1] == 3, [p["tag"] for p in seen]
    # (before step 1 settles the page says "0 of 3 steps" with no rows)
    provisional = [p for p in seen if p["tag"].startswith("PROVISIONAL") and p["rows"]]
    assert provisional, [p["tag"] for p in seen]  # steps of 4 s: the page shows at least one
    for p in provisional:
        k = len(p["rows"])
        assert p["tag"].startswith(f"PROVISIONAL · {k} of 3 steps"), p
        assert p["tpot_dots"] >= k and p["qps_dots"] >= k and p["base_dots"] == 3, p
        assert p["verdict"] and "spec" in p["verdict"], p
        assert [r[0] for r in p["rows"]] == ["4", "8", "24"][:k], p
        # the change with its CI, worded by the server as in the reports: "-15.6 % (-18.3…-12.0)"
        assert all(re.fullmatch(r"[-+]\d+\.\d % \([-+]\d+\.\d…[-+]\d+\.\d\)", cell)
                   for row in p["rows"] for cell in row[1:]), p  # fmt: skip
    # the same answer on the terminal, for a headless or distributed user, step by step
    log = ui.log.read_text()
    for k in (1, 2):
        assert f"vs baseline (provisional, {k} step" in log
    assert "vs baseline (final, 3 steps): spec " in log


def test_report_button_writes_compares_files_and_opens_report_html(ui: Ui) -> None:
    with chromium_page(width=1400, height=1100) as (page, errors):
        if not _finished(ui):  # run alone: make the run first
            _start(page, ui)
            _poll(page, lambda: _finished(ui), "the run's end", ui)
        page.goto(ui.url + "/?tab=specload")
        button = page.get_by_test_id("specload-report-button")
        _poll(page, lambda: button.is_enabled(), "an enabled Report button", ui, 15)
        shown = _panel(page)["rows"]
        shown_effects = page.locator(
            '[data-testid="specload-ratios"] tbody tr td:nth-child(2)'
        ).evaluate_all("cells => cells.map(c => c.dataset.effect)")
        button.click()
        link = page.get_by_test_id("specload-report-link")
        link.wait_for(timeout=60_000)
        assert link.get_attribute("href") == "./specload/report/report.html"
        page.screenshot(path=str(artifact_path("webui-compare-report.png")), full_page=True)
        assert not errors, errors
    with urllib.request.urlopen(ui.url + "/specload/report/report.html", timeout=10) as r:
        html = r.read().decode()
    assert r.status == 200 and "<html" in html.lower() and "baseline" in html
    out = ui.run_dir.parent / "reports" / "spec-vs-baseline"
    assert {p.name for p in out.iterdir()} >= {"report.html", "report.json", "report.md"}
    assert "report: runs/reports/spec-vs-baseline/report.html" in ui.log.read_text()  # printed
    # what the page showed is compare's answer on the same two run dirs (same bootstrap seed)
    report = json.loads((out / "report.json").read_text())
    ratios = report["ratios"]["spec"]
    for row in shown:
        q = float(row[0])
        want = next(x for x in ratios["tpot_p50"] if x["target_qps"] == q)
        shown_as = signed_change(Estimate(want["value"], want["lo"], want["hi"]))
        assert row[1] == shown_as, (row, want)
    assert [e["effect"] for e in ratios["tpot_p50"]] == shown_effects
