"""``specload sweep`` over baseline / ngram / prefix on real vLLM, then ``specload compare``.

The sweep measures the session's real servers, one per condition (``--url``; started with
``tools.vllm_env.CONDITION_FLAGS``, the flags declared again), runs the vLLM smoke scenario
(the smoke steps with a 48-token shared prefix, so a ``--block-size 32`` cache has whole
blocks to hit), and compares. What must hold on any machine: one record per request with the
fixed output length; acceptance figures computed from vLLM's real ``spec_decode`` counters in
the speculative run and absent (not zero) in the baseline; prefix hits in the prefix run;
at temperature 0 the speculative server's outputs identical to the baseline's (n-gram drafting
is lossless); the report builds. No timings are asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specload.analysis.inputs.features import features_of
from specload.metrics.scrape import split_key
from tests.conftest import REPO
from tools.vllm_env import CONDITION_FLAGS, NGRAM_SPEC_CONFIG

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1200)]

SCENARIO = REPO / "scenarios" / "vllm-smoke.yaml"
CONDITIONS = ("baseline", "ngram", "prefix")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _names(scrape: dict[str, Any]) -> set[str]:
    return {split_key(k)[0] for k in scrape["values"]}


def _total(scrape: dict[str, Any], name: str) -> float:
    return sum(v for k, v in scrape["values"].items() if split_key(k)[0] == name)


#: What each condition declares for its server (``--url`` runs are not started by the sweep,
#: so the flags that started them are said again, as a user managing servers would).
DECLARED: dict[str, tuple[str, ...]] = {
    "baseline": ("--prefix-caching", "off"),
    "ngram": ("--speculative-config", json.dumps(NGRAM_SPEC_CONFIG), "--prefix-caching", "off"),
    "prefix": ("--prefix-caching", "on"),
}


@pytest.fixture(scope="module", autouse=True)
def _free_the_servers_after(vllm_server_factory) -> Iterator[None]:
    """The last real-vLLM module: its worker goes on with other tests, which an idle vLLM
    server (~10 % of a core each, ~3 GB) would only slow down."""
    yield
    vllm_server_factory.stop_all()


@pytest.fixture(scope="module")
def sweep(vllm_server_factory, tmp_path_factory) -> dict[str, Any]:
    """One condition per ``specload sweep --url`` against the session's real servers (the
    same servers the other real-vLLM tests use: a start costs ~30 s); the last invocation
    compares all three. Sweeps that start their own servers are tested on the simulator."""
    servers = vllm_server_factory.start_many(*(CONDITION_FLAGS[name] for name in CONDITIONS))
    out = tmp_path_factory.mktemp("vllm-sweep") / "sweep"
    for name, server in zip(CONDITIONS, servers, strict=True):
        cmd = [sys.executable, "-m", "specload", "sweep", "--url", server.url, "--label", name,
               *DECLARED[name], "--scenario", str(SCENARIO), "--out", str(out)]  # fmt: skip
        proc = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=600, cwd=REPO
        )
        said = f"specload sweep {name} exit {proc.returncode}:\n{proc.stdout[-3000:]}\n"
        assert proc.returncode == 0, said + proc.stderr[-3000:]
    report = json.loads((out / "report" / "report.json").read_text())
    assert report["exit_code"] == 0
    runs = {
        name: {
            "meta": json.loads((out / name / "run.json").read_text()),
            "records": _read_jsonl(out / name / "requests.jsonl"),
            "scrapes": _read_jsonl(out / name / "metrics.jsonl"),
        }
        for name in CONDITIONS
    }
    return {"dir": out, "report": report, "runs": runs}


def test_every_condition_ran_with_one_fixed_length_record_per_request(sweep) -> None:
    for name, run in sweep["runs"].items():
        meta, records = run["meta"], run["records"]
        assert meta["status"] == "completed", name
        assert records and meta["counts"]["sent"] == meta["counts"]["recorded"] == len(records), (
            name
        )
        assert all(r["ok"] for r in records), [r["error"] for r in records if not r["ok"]][:3]
        assert {r["output_tokens"] for r in records} == {meta["scenario"]["max_tokens"]}, name
        assert {r["tokens_source"] for r in records} == {"usage"}, name
        assert {r["finish_reason"] for r in records} == {"length"}, name
        assert meta["target"]["server_version"] == "0.32.0", name


def test_conditions_are_declared_in_run_json(sweep) -> None:
    cond = {name: run["meta"]["condition"] for name, run in sweep["runs"].items()}
    values = {name: (c["speculative"], c["prefix_caching"]) for name, c in cond.items()}
    assert values == {
        "baseline": (None, False),
        "ngram": (NGRAM_SPEC_CONFIG, False),
        "prefix": (None, True),
    }
    # what a flag says is declared; no flag turned speculation off, so that stays for the
    # server's own /metrics to tell (next test)
    assert cond["ngram"]["source"] == {"speculative": "declared", "prefix_caching": "declared"}
    assert cond["baseline"]["source"] == {"speculative": "unknown", "prefix_caching": "declared"}


def test_real_vllm_metrics_tell_each_condition_apart_undeclared(sweep) -> None:
    """vLLM's own /metrics (``vllm:cache_config_info``, the ``spec_decode`` counters) say what
    each server ran, even with nothing declared: compare reads them for an undeclared run."""
    undeclared = {"speculative": None, "prefix_caching": None}
    for name, run in sweep["runs"].items():
        f = features_of(undeclared, run["scrapes"])
        assert (f.spec_on, f.prefix_caching) == (name == "ngram", name == "prefix"), name
        assert f.source == {"speculative": "server", "prefix_caching": "server"}, name


def test_spec_decode_counters_exist_only_in_the_speculative_run(sweep) -> None:
    runs = sweep["runs"]
    spec = "vllm:spec_decode_num_drafts_total"
    assert spec in _names(runs["ngram"]["scrapes"][-1])
    assert spec not in set().union(*(_names(s) for s in runs["baseline"]["scrapes"]))
    first, last = runs["ngram"]["scrapes"][0], runs["ngram"]["scrapes"][-1]
    assert _total(last, spec) - _total(first, spec) > 0, "vLLM drafted nothing during the run"


def test_per_step_acceptance_comes_from_real_deltas_in_spec_run_only(sweep) -> None:
    steps = sweep["report"]["steps"]
    for step in steps["ngram"]:
        s = step["server"]
        assert s["drafts"] > 0 and s["draft_tokens"] >= s["drafts"], s
        assert s["acceptance_rate"] == pytest.approx(s["accepted_tokens"] / s["draft_tokens"])
        assert s["acceptance_length"] == pytest.approx(1 + s["accepted_tokens"] / s["drafts"])
        assert 0.0 <= s["acceptance_rate"] <= 1.0
        assert len(s["per_position"]) == NGRAM_SPEC_CONFIG["num_speculative_tokens"]
    for name in ("baseline", "prefix"):
        for step in steps[name]:
            s = step["server"]
            assert s["acceptance_rate"] is None and s["acceptance_length"] is None, (name, s)


def test_prefix_run_hits_the_cache_and_the_baseline_does_not(sweep) -> None:
    steps = sweep["report"]["steps"]
    rates = [step["server"]["prefix_hit_rate"] for step in steps["prefix"]]
    assert rates and all(r is not None and r > 0 for r in rates), rates
    assert all(not step["server"]["prefix_hit_rate"] for step in steps["baseline"])


def test_spec_outputs_match_baseline_exactly_at_temperature_0(sweep) -> None:
    contract = {c["condition"]: c for c in sweep["report"]["contract"]}["ngram"]
    assert contract["temperature"] == 0.0
    assert contract["compared"] > 0
    assert contract["exact_match"] == 1.0
    # and from the records themselves: the same prompt gave the same output on both servers
    outputs: dict[str, dict[str, str]] = {}
    for name in ("baseline", "ngram"):
        for r in sweep["runs"][name]["records"]:
            outputs.setdefault(r["prompt_sha256"], {})[name] = r["output_sha256"]
    both = [o for o in outputs.values() if len(o) == 2]
    assert both and all(o["baseline"] == o["ngram"] for o in both)


def test_compare_report_builds_from_the_run_dirs(sweep, tmp_path: Path) -> None:
    report_dir = sweep["dir"] / "report"
    for name in ("report.md", "report.html", "report.json"):
        assert (report_dir / name).stat().st_size > 0, name
    assert [c["label"] for c in sweep["report"]["conditions"]] == list(CONDITIONS)
    again = tmp_path / "again"
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "compare", "--out", str(again), "--quiet",
         *(str(sweep["dir"] / name) for name in CONDITIONS)],
        check=False, capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rebuilt = json.loads((again / "report.json").read_text())
    assert rebuilt["verdict"] == sweep["report"]["verdict"]
    assert "ngram" in (again / "report.md").read_text()
