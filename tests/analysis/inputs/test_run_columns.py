"""The run-dir reader: tolerant of a killed writer, strict about what is not a run dir."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import Cond, write_run
from specload.analysis.inputs.run_columns import (
    BadLine,
    NewerSchema,
    RunNotCompleted,
    StepsUnreadable,
    Unrecorded,
    load_run,
)
from specload.core.errors import ConfigError


def test_partial_trailing_line_is_skipped_and_reported(tmp_path: Path) -> None:
    run = load_run(
        write_run(tmp_path / "r", Cond("baseline"), qps=(2,), n=30, warm=5, partial_tail=True)
    )
    assert run.n == 35
    assert run.warnings == [BadLine(tmp_path / "r" / "requests.jsonl", 36, "partial")]


def test_corrupt_middle_line_is_skipped_with_its_line_number(tmp_path: Path) -> None:
    path = write_run(tmp_path / "r", Cond("baseline"), qps=(2,), n=10, warm=0)
    lines = (path / "requests.jsonl").read_bytes().splitlines(keepends=True)
    lines[3] = b"{not json\n"
    (path / "requests.jsonl").write_bytes(b"".join(lines))
    run = load_run(path)
    assert run.n == 9 and run.warnings == [BadLine(path / "requests.jsonl", 4, "not_json")]


def test_what_run_json_steps_json_and_metrics_jsonl_say_against_a_run(tmp_path: Path) -> None:
    """Each thing the reader found, in the order found: the records' file, metrics.jsonl,
    run.json's status and unrecorded requests, steps.json."""
    path = write_run(tmp_path / "r", Cond("baseline"), qps=(2,), n=10, warm=0)
    lines = (path / "requests.jsonl").read_bytes().splitlines(keepends=True)
    lines[0] = json.dumps(json.loads(lines[0]) | {"schema_version": 7}).encode() + b"\n"
    (path / "requests.jsonl").write_bytes(b"".join(lines))
    with (path / "metrics.jsonl").open("ab") as fh:
        fh.write(b"garbage\n")
    meta = json.loads((path / "run.json").read_text())
    meta["status"], meta["counts"] = "interrupted", {"sent": 12, "recorded": 10, "unrecorded": 2}
    (path / "run.json").write_text(json.dumps(meta))
    (path / "steps.json").write_text("{}")
    n_metrics = len((path / "metrics.jsonl").read_bytes().splitlines())
    assert load_run(path).warnings == [
        NewerSchema(path / "requests.jsonl", 7, 1),
        BadLine(path / "metrics.jsonl", n_metrics, "not_json"),
        RunNotCompleted(path, "interrupted"),
        Unrecorded(path, 2),
        StepsUnreadable(path / "steps.json", "not a list"),
    ]


def test_a_completed_run_has_nothing_to_say(tmp_path: Path) -> None:
    assert (
        load_run(write_run(tmp_path / "r", Cond("baseline"), qps=(2,), n=10, warm=0)).warnings == []
    )


def test_columns_keep_nulls_as_nan_and_error_kinds(tmp_path: Path) -> None:
    run = load_run(
        write_run(tmp_path / "r", Cond("baseline", error_rate=0.3), qps=(2,), n=100, warm=0)
    )
    failed = ~run.cols["ok"]
    assert failed.any() and np.isnan(run.cols["ttft_s"][failed]).all()
    assert set(run.cols["error_kind"][failed].tolist()) == {"http"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "does not exist"),
        ("no_run_json", "no run.json"),
        ("empty", "holds no records"),
        ("foreign", "expected an object with 'label'"),
    ],
)
def test_bad_run_dirs_raise_one_line_config_errors(
    tmp_path: Path, setup: str, message: str
) -> None:
    path = tmp_path / "r"
    if setup != "missing":
        path.mkdir()
    if setup == "empty":
        (path / "run.json").write_text('{"label": "x"}')
        (path / "requests.jsonl").write_text("")
    if setup == "foreign":
        (path / "run.json").write_text('["something else"]')
    with pytest.raises(ConfigError, match=message) as exc:
        load_run(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
