"""With ``--store-text``, the HTML report shows the same prompts' outputs side by side.

Real runs: two ``specload run --store-text`` against the simulator (baseline and
speculative). The simulator is lossless, so the pair starts identical; one output of the
spec run is then changed on disk, as a server that altered an answer would have, and the
report must put that sample first with the changed words marked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from browser import artifact_path, chromium_page

from specload.analysis.compare import compare_runs
from specload.report import write_reports
from tests.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SPEC = '{"method":"draft_model","model":"d","num_speculative_tokens":3}'


#: smoke.yaml's shape, one shorter step: samples need a few stored outputs, not a ladder.
SCENARIO = """\
name: samples
max_tokens: 16
steps: [4]
step_duration_s: 1.5
warmup_s: 0.5
max_concurrency: 16
metrics_interval_s: 1
request_timeout_s: 30
prompts:
  synthetic: {input_tokens: 64, count: 20}
"""


def _run(url: str, label: str, out: Path, *extra: str) -> None:
    scenario = out.parent / "samples.yaml"
    scenario.write_text(SCENARIO)
    cmd = [
        sys.executable,
        "-m",
        "specload",
        "run",
        "--host",
        url,
        "--scenario",
        str(scenario),
        "--label",
        label,
        "--out",
        str(out),
        *extra,
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=REPO, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def _alter_one_output(run_dir: Path) -> str:
    """Change one word of the first stored output; return the new word."""
    path = run_dir / "requests.jsonl"
    lines = path.read_bytes().splitlines()
    for i, line in enumerate(lines):
        rec = orjson.loads(line)
        if rec.get("ok") and not rec.get("warmup") and rec.get("output_text"):
            words = rec["output_text"].split(" ")
            words[len(words) // 2] = "ZEBRAWORD"
            rec["output_text"] = " ".join(words)
            lines[i] = orjson.dumps(rec)
            path.write_bytes(b"\n".join(lines) + b"\n")
            return "ZEBRAWORD"
    raise AssertionError("no stored output to alter")


def test_store_text_runs_show_side_by_side_samples_with_differences_marked(
    sim_factory, tmp_path: Path
) -> None:
    base_sim = sim_factory("--profile", "tiny")
    spec_sim = sim_factory("--profile", "tiny", "--speculative-config", SPEC)
    _run(base_sim.url, "baseline", tmp_path / "baseline", "--store-text")
    _run(spec_sim.url, "spec", tmp_path / "spec", "--store-text", "--speculative-config", SPEC)
    _run(spec_sim.url, "spec-notext", tmp_path / "notext", "--speculative-config", SPEC)

    lossless = compare_runs([tmp_path / "baseline", tmp_path / "spec"], bootstrap=50)
    assert lossless.samples["spec"], "no samples from --store-text runs"
    assert all(s.identical for s in lossless.samples["spec"])  # the simulator is lossless
    without = compare_runs([tmp_path / "baseline", tmp_path / "notext"], bootstrap=50)
    assert "spec-notext" not in without.samples  # no text stored: nothing shown, no guess

    word = _alter_one_output(tmp_path / "spec")
    changed = compare_runs([tmp_path / "baseline", tmp_path / "spec"], bootstrap=50)
    first = changed.samples["spec"][0]
    assert not first.identical and word in first.condition_text
    path = write_reports(changed, tmp_path / "report")["html"]
    with chromium_page() as (page, errors):
        page.goto(path.as_uri(), wait_until="load")
        heads = page.eval_on_selector_all("h2", "hs => hs.map(h => h.textContent)")
        marked = page.eval_on_selector_all("table.samples ins", "xs => xs.map(x => x.textContent)")
        rows = page.eval_on_selector_all("tr.sample", "rs => rs.map(r => r.className)")
        page.screenshot(path=str(artifact_path("report-output-samples.png")), full_page=True)
    assert errors == []
    assert "Output samples: baseline vs spec" in heads
    assert word in marked
    assert rows[0] == "sample differs" and "sample identical" in rows[1:]
