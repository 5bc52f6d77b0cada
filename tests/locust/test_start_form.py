"""What the start form shows beside Locust's fields (``specload/locust/start_form.py``)."""

from __future__ import annotations

from pathlib import Path

import orjson

from specload.locust.start_form import baseline_choices, step_plan


def test_the_plan_lists_every_step_and_the_run_length(tmp_path: Path) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text(
        "name: p\nsteps: [2, 4]\nrepeats: 2\nstep_duration_s: 10\nwarmup_s: 2\n"
        "max_concurrency: 7\nprompts: {synthetic: {input_tokens: 8, count: 4}}\n"
    )
    plan = step_plan(str(sc))
    assert [(s["index"], s["repeat"], s["target_qps"]) for s in plan["steps"]] == [
        (0, 0, 2.0),
        (1, 0, 4.0),
        (2, 1, 2.0),
        (3, 1, 4.0),
    ]
    assert plan["total_s"] == 4 * 12 and plan["max_concurrency"] == 7


def test_a_bad_scenario_names_the_file_and_key(tmp_path: Path) -> None:
    sc = tmp_path / "bad.yaml"
    sc.write_text("name: p\nsteps: fast\n")
    err = step_plan(str(sc))["error"]
    assert str(sc) in err and "steps" in err
    assert "no scenario" in step_plan("")["error"]


def _run(d: Path, label: str, status: str, started: float) -> None:
    d.mkdir(parents=True)
    meta = {"label": label, "status": status, "started_at": started, "scenario": {"name": "x"}}
    (d / "run.json").write_bytes(orjson.dumps(meta))


def test_finished_runs_are_offered_newest_first(tmp_path: Path) -> None:
    _run(tmp_path / "old", "baseline", "completed", 100.0)
    _run(tmp_path / "new", "spec", "degraded", 200.0)
    _run(tmp_path / "sweep" / "baseline-r1", "baseline", "completed", 150.0)
    _run(tmp_path / "killed", "x", "interrupted", 300.0)  # not a finished run
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "run.json").write_text("{not json")
    got = baseline_choices(str(tmp_path))
    assert [Path(r["path"]).name for r in got] == ["new", "baseline-r1", "old"]
    assert baseline_choices(str(tmp_path / "missing")) == []
