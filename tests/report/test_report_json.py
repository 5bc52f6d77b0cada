"""report.json read back as data (``report/report_json.py``): what the writer writes, the
reader gives back typed, and a file that is not this schema's is one line naming the file,
the key and what was expected."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from specload.analysis.comparison import Comparison
from specload.analysis.statistics.effect import UNDECIDED
from specload.core.errors import ConfigError
from specload.report import write_report_files
from specload.report.model import build_report
from specload.report.report_json import JSON_SCHEMA, read_report


@pytest.fixture(scope="module")
def written(four_way: Comparison, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    write_report_files(build_report(four_way), out, html=False)
    return out / "report.json"


def _same(a: float | None, b: float | None) -> bool:
    """Equal, where a NaN the writer wrote as null reads as None."""
    if a is None or b is None:
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return a == b


def test_what_the_writer_writes_reads_back_typed(four_way: Comparison, written: Path) -> None:
    report = build_report(four_way)
    got = read_report(written.parent)  # the folder reads as its report.json
    assert got.schema == JSON_SCHEMA and got.file == written
    assert got.headline == report.headline and got.verdicts == report.verdicts
    assert got.baseline == four_way.baseline == "baseline" and got.metric == four_way.metric
    assert got.rule.startswith("A step helps when the latency is at least 5 % lower")
    # every ratio row of every condition and metric: load, figure, effect, time to decide
    assert got.ratios.keys() == four_way.ratios.keys()
    for label, metrics in four_way.ratios.items():
        assert got.ratios[label].keys() == metrics.keys()
        for m, rows in metrics.items():
            cells = got.ratios[label][m]
            assert [c.target_qps for c in cells] == [r.target_qps for r in rows]
            for cell, row in zip(cells, rows, strict=True):
                assert cell.effect == row.effect and cell.to_decide_s == row.to_decide_s
                for part in ("value", "lo", "hi"):
                    assert _same(getattr(cell.ratio, part), getattr(row.ratio, part))
    # the comparison has undecided steps, each with the time that would likely decide it
    undecided = [c for ms in got.ratios.values() for cs in ms.values() for c in cs]
    undecided = [c for c in undecided if c.effect == UNDECIDED]
    assert undecided and any(c.to_decide_s is not None for c in undecided)
    # per-step latencies and the crossovers, as compared
    spec = got.steps["spec-ngram-k4"]
    assert [s.target_qps for s in spec] == [s.target_qps for s in four_way.steps["spec-ngram-k4"]]
    assert (
        spec[0].latency["tpot_p50"].value
        == four_way.steps["spec-ngram-k4"][0].latency["tpot_p50"].value
    )
    for x in four_way.crossovers:
        typed = got.crossovers[x.condition][x.metric]
        assert typed.status == x.status and typed.tested_range == x.tested_range
        assert typed.qps == x.qps and typed.last_helping_qps == x.last_helping_qps
        assert typed.ci == tuple(x.ci) and typed.ci_beyond == tuple(x.ci_beyond)
        assert (typed.stops_at is None) == (x.stop is None)
        if x.stop is not None and typed.stops_at is not None:
            assert typed.stops_at.to_dict() == x.stop.to_dict()
    assert got.crossovers["spec-ngram-k4"]["tpot_p50"].stops_at is not None


def _broken(written: Path, tmp_path: Path, change: Callable[[dict], object]) -> Path:
    data = orjson.loads(written.read_bytes())
    change(data)
    path = tmp_path / "report.json"
    path.write_bytes(orjson.dumps(data))
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        read_report(path)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    return str(err.value)


def test_another_schema_is_refused_with_both_names(written: Path, tmp_path: Path) -> None:
    path = _broken(written, tmp_path, lambda d: d.update(schema="specload.report/1"))
    msg = _error(path)
    assert msg.startswith(f"{path}: schema: 'specload.report/1' is not this specload's")
    assert msg.endswith("(expected 'specload.report/3')")
    assert _error(_broken(written, tmp_path, lambda d: d.pop("schema"))).endswith(
        "schema: missing (expected a string)"
    )


def test_a_missing_or_mistyped_key_is_named_with_its_path(written: Path, tmp_path: Path) -> None:
    def drop_effect(d: dict) -> None:
        del d["ratios"]["spec-ngram-k4"]["tpot_p50"][0]["effect"]

    msg = _error(_broken(written, tmp_path, drop_effect))
    where = "ratios.spec-ngram-k4.tpot_p50.0.effect"
    assert msg == f"{tmp_path / 'report.json'}: {where}: missing (expected a string)"

    def odd_effect(d: dict) -> None:
        d["ratios"]["spec-ngram-k4"]["tpot_p50"][0]["effect"] = "no_change"

    assert _error(_broken(written, tmp_path, odd_effect)).endswith(
        "ratios.spec-ngram-k4.tpot_p50.0.effect: 'no_change' (expected one of helps, hurts, "
        "same, undecided, n/a, incomplete)"
    )

    def text_ratio(d: dict) -> None:
        d["ratios"]["prefix"]["ttft_p50"][1]["value"] = "0.6"

    assert _error(_broken(written, tmp_path, text_ratio)).endswith(
        'ratios.prefix.ttft_p50.1.value: a string "0.6" (expected a number or null)'
    )

    def no_steps(d: dict) -> None:
        del d["steps"]

    assert _error(_broken(written, tmp_path, no_steps)).endswith(
        "steps: missing (expected a value)"
    )

    def half_ci(d: dict) -> None:
        d["crossover"]["spec-ngram-k4"]["tpot_p50"]["ci"] = [8.0]

    assert _error(_broken(written, tmp_path, half_ci)).endswith(
        "crossover.spec-ngram-k4.tpot_p50.ci: a list [8.0] (expected [lo, hi]: two numbers or "
        "nulls)"
    )


def test_a_file_that_is_no_report_is_one_line(tmp_path: Path) -> None:
    assert _error(tmp_path / "none.json").endswith(
        "none.json: no such file (expected specload compare's report.json)"
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": ')
    assert "bad.json: not valid JSON" in _error(bad)
    bad.write_text("[1, 2]")
    assert _error(bad).endswith(
        "bad.json: a list [1,2] (expected an object (not a specload report.json?))"
    )
