"""Columns from requests.jsonl: the parallel path equals the serial one, line numbers survive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.synth_rundir import Cond, write_run
from specload.analysis.inputs import columns
from specload.analysis.inputs.run_columns import BadLine, load_runs
from tests.conftest import REPO


def _corrupt(path: Path, line_no: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line_no - 1] = b'{"broken": \n'
    path.write_bytes(b"".join(lines))


def parallel_equals_serial(root: str) -> None:
    """The check, in a process of its own (``test_parallel_...`` below)."""
    runs = [
        write_run(Path(root) / c, Cond(c), qps=(2, 4), n=400, warm=10, metrics=False)
        for c in ("a", "b")
    ]
    _corrupt(runs[1] / "requests.jsonl", 700)
    os.environ["SPECLOAD_COMPARE_PROCS"] = "1"
    serial = load_runs(runs)
    os.environ["SPECLOAD_COMPARE_PROCS"] = "2"
    columns.PARALLEL_MIN_BYTES = 0
    assert columns._procs() == 2
    parallel = load_runs(runs)
    for s, p in zip(serial, parallel, strict=False):
        assert s.n == p.n and set(s.cols) == set(p.cols)
        for k in s.cols:
            if s.cols[k].dtype == np.float64:
                np.testing.assert_array_equal(s.cols[k], p.cols[k])
            else:
                assert s.cols[k].tolist() == p.cols[k].tolist(), k
    assert parallel[1].n == 819
    path = runs[1] / "requests.jsonl"
    assert parallel[1].warnings == serial[1].warnings == [BadLine(path, 700, "not_json")]


def test_parallel_parse_equals_serial_and_keeps_line_numbers(tmp_path: Path) -> None:
    # In a fresh interpreter: this one may be gevent-patched by an earlier test that
    # imported Locust, where the parse never uses processes (next test).
    code = (
        "import sys; sys.path[:0] = ['tests', '.']\n"
        "from tests.analysis.inputs.test_columns import parallel_equals_serial\n"
        f"parallel_equals_serial({str(tmp_path)!r})\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_gevent_patched_process_parses_alone_whatever_the_variable_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECLOAD_COMPARE_PROCS", "4")
    monkeypatch.setattr(columns, "_gevent_patched", lambda: True)
    assert columns._procs() == 1
    monkeypatch.setattr(columns, "_gevent_patched", lambda: False)
    assert columns._procs() == 4


def test_ranges_start_on_line_boundaries(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"".join(b'{"i": %d}\n' % i for i in range(1000)))
    ranges = columns._ranges(path, 7)
    assert ranges[0][0] == 0 and ranges[-1][1] == path.stat().st_size
    data = path.read_bytes()
    for a, _b in ranges:
        assert a == 0 or data[a - 1 : a] == b"\n"
    total = sum(columns.parse_range(str(path), a, b).lines for a, b in ranges)
    assert total == 1000


def test_hashes_become_64_bit_codes_and_non_hex_values_are_hashed() -> None:
    digest = "ab" * 32
    codes = columns._hash64([digest, None, digest, "not-a-hex-digest-at-all", "short"])
    assert codes[0] == codes[2] == int(digest[:16], 16) and codes[1] == 0
    assert codes[3] != 0 and codes[4] != 0 and codes[3] != codes[4]


def test_hash_codes_agree_whether_or_not_a_chunk_holds_a_non_hex_value() -> None:
    digest = "cd" * 32
    alone = columns._hash64([digest, "ab" * 32])
    mixed = columns._hash64([digest, "not hex but long enough", "ab cd" * 8])
    assert alone[0] == mixed[0]


@pytest.mark.parametrize("chunk", [64, 1000, 4096])
def test_tiny_chunks_and_lines_longer_than_the_buffer_parse_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    run = write_run(
        tmp_path / "r",
        Cond("a"),
        qps=(2,),
        n=60,
        warm=0,
        metrics=False,
        itl=True,
        partial_tail=True,
    )
    path = run / "requests.jsonl"
    _corrupt(path, 17)
    whole = columns.parse_range(str(path), 0, path.stat().st_size)
    monkeypatch.setattr(columns, "CHUNK_BYTES", chunk)
    small = columns.parse_range(str(path), 0, path.stat().st_size)
    assert small.lines == whole.lines == 61
    assert small.bad_lines == whole.bad_lines == [(17, "not_json"), (61, "partial")]
    np.testing.assert_array_equal(small.cols["e2e_s"], whole.cols["e2e_s"])
    assert small.cols["prompt_sha256"].tolist() == whole.cols["prompt_sha256"].tolist()


def test_a_broken_worker_pool_falls_back_to_parsing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures.process import BrokenProcessPool

    run = write_run(tmp_path / "r", Cond("a"), qps=(2,), n=50, warm=0, metrics=False)

    def broken(*_args: object) -> None:
        raise BrokenProcessPool("worker died")

    monkeypatch.setenv("SPECLOAD_COMPARE_PROCS", "2")
    monkeypatch.setattr(columns, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(columns, "_parallel", broken)
    assert load_runs([run])[0].n == 50


def test_workers_do_not_rerun_the_callers_main_module(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = write_run(tmp_path / "r", Cond("a"), qps=(2,), n=50, warm=0, metrics=False)
    code = (
        "import os; os.environ['SPECLOAD_COMPARE_PROCS'] = '2'\n"
        "from specload.analysis.inputs import columns; columns.PARALLEL_MIN_BYTES = 0\n"
        "from specload.analysis.inputs.run_columns import load_runs\n"
        f"print('n', load_runs([{str(run)!r}])[0].n)\n"
    )
    # Fed on stdin: a spawned child that re-imported __main__ would fail on '<stdin>'.
    proc = subprocess.run(
        [sys.executable, "-"], input=code, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "n 50" and "Traceback" not in proc.stderr
