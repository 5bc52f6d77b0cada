"""The run directory: what the master writes is what analysis reads, even after a crash."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest

from specload.analysis.inputs.run_columns import load_run
from specload.core.errors import ConfigError
from specload.core.records import ErrorInfo, RequestRecord
from specload.recorder import JsonlWriter, RunMeta, RunWriter, check_out_dir, iter_jsonl, read_run
from specload.recorder.run_json import RUN_SCHEMA_PATH, validate_run_json
from tests.conftest import REPO


def _record(i: int, *, ok: bool = True) -> RequestRecord:
    return RequestRecord(
        request_id=f"r-{i}",
        worker="local",
        step=0,
        target_qps=2.0,
        warmup=i == 0,
        scheduled_at=100.0 + i,
        sent_at=100.001 + i,
        ttft_s=0.01,
        tpot_s=0.002,
        e2e_s=0.05,
        output_tokens=21,
        ok=ok,
        error=None if ok else ErrorInfo("http", "500"),
    )


def test_run_dir_round_trips_meta_steps_records_and_metrics(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x1", label="baseline", started_at=99.0))
    w.begin_step(
        {
            "index": 0,
            "repeat": 0,
            "target_qps": 2.0,
            "start": 100.0,
            "warmup_end": 101.0,
            "end": 103.0,
        }
    )
    w.add_metrics(100.0, 0, "start", {"vllm:num_requests_running": 0.0})
    w.add_records([_record(0), _record(1), _record(2, ok=False).to_dict()])
    w.add_metrics(103.0, 0, "end", {"vllm:num_requests_running": 1.0})
    w.end_step(0, 103.02)
    w.meta.counts = {"sent": 3, "recorded": 3, "by_worker": {"local": {"sent": 3, "recorded": 3}}}
    w.close("completed", 104.0)

    run = read_run(tmp_path / "run")
    assert run.meta.status == "completed" and run.meta.ended_at == 104.0
    assert run.meta.label == "baseline" and run.meta.counts["recorded"] == 3
    assert run.steps == [
        {
            "index": 0,
            "repeat": 0,
            "target_qps": 2.0,
            "start": 100.0,
            "warmup_end": 101.0,
            "end": 103.02,
        }
    ]
    records = list(run.records())
    assert [r.request_id for r in records] == ["r-0", "r-1", "r-2"]
    assert records[0].warmup is True and records[2].error == ErrorInfo("http", "500")
    assert [m["phase"] for m in run.metrics] == ["start", "end"]
    assert run.warnings == []


def test_run_json_is_rewritten_at_each_step_change(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "running"
    w.meta.workers = ["w1", "w2"]
    w.begin_step(
        {"index": 0, "repeat": 0, "target_qps": 1.0, "start": 1.0, "warmup_end": 1.0, "end": 2.0}
    )
    assert json.loads((tmp_path / "run" / "run.json").read_text())["workers"] == ["w1", "w2"]
    assert not list((tmp_path / "run").glob("*.tmp"))


def test_records_are_on_disk_after_step_end_without_close(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    w.add_records([_record(i) for i in range(5)])
    w.end_step(0, 5.0)  # a crash after this point must keep the five records
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 5


def test_reader_skips_and_reports_partial_trailing_line(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    w.add_records([_record(0), _record(1)])
    w.close("completed", 1.0)
    with open(tmp_path / "run" / "requests.jsonl", "ab") as fh:
        fh.write(b'{"request_id": "r-2", "wor')  # killed mid-write
    run = read_run(tmp_path / "run")
    assert [r.request_id for r in run.records()] == ["r-0", "r-1"]
    assert any("partial trailing line 3" in x for x in run.warnings)


def test_reader_warns_about_unfinished_and_lost_workers(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    w.meta.lost_workers = [{"worker": "w2", "at": 10.0, "sent": 7, "recorded": 5}]
    w.write_meta()  # the process then dies: status stays "running"
    run = read_run(tmp_path / "run")
    assert any("status is 'running'" in x for x in run.warnings)
    assert any("worker w2 lost at 10.0" in x for x in run.warnings)


def test_out_dir_holding_a_run_is_refused(tmp_path: Path) -> None:
    RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    with pytest.raises(ConfigError, match="already holds a run"):
        check_out_dir(tmp_path / "run")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_out_dir_is_a_config_error(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="not a writable directory"):
            check_out_dir(ro / "run")
    finally:
        ro.chmod(0o700)


def test_not_a_run_dir_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not a specload run directory \(no run.json\)"):
        read_run(tmp_path)


def test_jsonl_writer_buffers_until_flush_and_reader_reports_bad_middle_line(
    tmp_path: Path,
) -> None:
    p = tmp_path / "x.jsonl"
    w = JsonlWriter(p, buffer_lines=100)
    w.write({"a": 1})
    assert p.read_bytes() == b""
    w.flush()
    assert p.read_bytes() == b'{"a":1}\n'
    with open(p, "ab") as fh:
        fh.write(b"garbage\n")
    w.write({"a": 2})
    w.close()
    warnings: list[str] = []
    assert list(iter_jsonl(p, warnings)) == [{"a": 1}, {"a": 2}]
    assert warnings == [f"{p}: line 2 is not JSON, skipped"]


def test_out_dir_under_a_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a writable directory"):
        check_out_dir(tmp_path / "f" / "run")


def _written_run(path: Path) -> Path:
    """A run dir as the master writes it (one step, one record), closed."""
    w = RunWriter(path, RunMeta(run_id="x1", label="baseline", started_at=99.0, workers=["local"]))
    w.begin_step(
        {
            "index": 0,
            "repeat": 0,
            "target_qps": 2.0,
            "start": 100.0,
            "warmup_end": 100.0,
            "end": 101.0,
        }
    )
    w.add_records([_record(1)])
    w.end_step(0, 101.0)
    w.close("completed", 102.0)
    return path


def test_the_schema_accepts_what_the_writer_writes_and_the_runs_the_repo_ships(
    tmp_path: Path,
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(RUN_SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    written = json.loads((_written_run(tmp_path / "run") / "run.json").read_text())
    jsonschema.validate(written, schema)
    shipped = 0  # the GPU validation's run dirs, recorded by earlier versions of specload
    for tgz in sorted((REPO / "benchmarks" / "results").rglob("*.tar.gz")):
        with tarfile.open(tgz) as tar:
            for member in tar.getmembers():
                if member.name.endswith("/run.json"):
                    fh = tar.extractfile(member)
                    assert fh is not None
                    validate_run_json(json.load(fh), f"{tgz}:{member.name}")
                    shipped += 1
    assert shipped >= 6
    # the oldest form: no schema_version, host, replicate, budget or condition source
    validate_run_json(
        {
            "run_id": "old",
            "label": "baseline",
            "workers": [],
            "status": "completed",
            "condition": {"speculative": None, "prefix_caching": None},
        },
        "old.json",
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("workers", 2, "workers: 2 is not of type 'array' (expected a list of worker ids)"),
        ("status", "done", "status: 'done' is not one of"),
        ("counts", {"sent": "7", "recorded": 7}, "counts.sent: '7' is not of type 'integer'"),
        ("condition", {"speculative": "ngram"}, "condition.speculative: 'ngram' is not of type"),
        ("max_error_rate", 5, "max_error_rate: 5 is greater than the maximum of 1"),
        ("label", None, "label: None is not of type 'string'"),
    ],
)
def test_both_readers_refuse_a_bad_run_json_field_in_one_line(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    run = _written_run(tmp_path / "run")
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, field: value}))
    for reader in (read_run, load_run):
        with pytest.raises(ConfigError) as exc:
            reader(run)
        text = str(exc.value)
        assert text.startswith(f"{run / 'run.json'}: ") and message in text and "\n" not in text


def test_a_run_json_without_a_label_is_not_a_run(tmp_path: Path) -> None:
    run = _written_run(tmp_path / "run")
    meta = json.loads((run / "run.json").read_text())
    del meta["label"]
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="expected an object with 'label'"):
        read_run(run)


def test_run_json_and_steps_json_are_written_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write, fsync the file, rename, fsync the directory: a power loss leaves the old or
    the new file, never an empty one (the order of those calls is the whole guarantee)."""
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        calls.append(("rename", f"{Path(src).name}->{Path(dst).name}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    w.write_meta()
    w.write_steps()
    d = str(w.path)
    assert calls == [
        ("fsync", f"{d}/run.json.tmp"),
        ("rename", "run.json.tmp->run.json"),
        ("fsync", d),
        ("fsync", f"{d}/steps.json.tmp"),
        ("rename", "steps.json.tmp->steps.json"),
        ("fsync", d),
    ]


def test_a_second_writer_of_a_run_dir_in_use_gets_one_line(tmp_path: Path) -> None:
    """Two masters given one ``--out``: the second fails before writing anything, naming the
    directory, instead of appending its records to the first one's requests.jsonl."""
    first = RunWriter(tmp_path / "run", RunMeta(run_id="a", label="l"))
    (tmp_path / "run" / "run.json").unlink()  # as if both started at once: no run.json yet
    with pytest.raises(ConfigError) as exc:
        RunWriter(tmp_path / "run", RunMeta(run_id="b", label="l"))
    assert str(exc.value).startswith(f"{tmp_path / 'run'}: in use") and exc.value.exit_code == 2
    assert "\n" not in str(exc.value)
    first.close("completed", 1.0)  # still held after close: late records may follow
    with pytest.raises(ConfigError, match="in use"):
        RunWriter(tmp_path / "run", RunMeta(run_id="b", label="l"))


def test_late_records_are_appended_after_close(tmp_path: Path) -> None:
    w = RunWriter(tmp_path / "run", RunMeta(run_id="x", label="l"))
    w.add_records([_record(1)])
    w.close("completed", 200.0)
    assert w.append_late([_record(2).to_dict(), _record(3).to_dict()]) == 2
    assert [r.request_id for r in read_run(w.path).records()] == ["r-1", "r-2", "r-3"]


def test_a_run_json_from_an_older_writer_reads_as_it_was_written() -> None:
    """Only ``label`` is required of a run.json: what an older writer left out reads as not
    recorded, not as what a new run would get (the reading process's own versions)."""
    from specload.recorder.rundir import RunMeta

    meta = RunMeta.from_dict({"label": "old", "status": "completed", "newer_key": 1})
    assert (meta.run_id, meta.label, meta.status) == ("", "old", "completed")
    assert meta.versions == {} and meta.replicate is None


def test_a_sweep_stamps_run_json_typed_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    from specload.recorder.rundir import update_run_meta

    meta = RunMeta(run_id="r1", label="spec").to_dict()
    (tmp_path / "run.json").write_text(json.dumps({**meta, "from_a_newer_writer": {"x": 1}}))

    def stamp(m: RunMeta) -> None:
        m.status, m.replicate = "degraded", 2

    assert update_run_meta(tmp_path, stamp) is not None
    after = json.loads((tmp_path / "run.json").read_text())
    assert after["status"] == "degraded" and after["replicate"] == 2
    assert after["from_a_newer_writer"] == {"x": 1} and after["label"] == "spec"
    # no run.json: nothing to stamp, nothing written
    assert update_run_meta(tmp_path / "none", stamp) is None
    assert not (tmp_path / "none").exists()
