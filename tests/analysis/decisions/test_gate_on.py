"""Gates judge the CI of the change (``--gate-on ci``, the default), not its point estimate.

Spec's p95 TPOT is 30 % higher at one load. The limit is then set from the report's own
figures: between the CI's lower end and the estimate (the CI straddles the limit: passes,
with a "possible regression" line; ``--gate-on point`` fails), below the CI's lower end (the
whole CI beyond: fails either way), above the CI (passes, nothing said).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.synth_rundir import SPEC, Cond, write_run
from specload.analysis.decisions.capacity import (
    CROSSES,
    Capacity,
    CapacityChange,
    capacity_change,
    capacity_gate,
)
from specload.analysis.decisions.crossover import Boundary
from specload.analysis.decisions.gates import parse_gate
from specload.cli.main import main
from specload.report.capacity_words import change_text
from specload.report.gate_words import gate_message


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("gate-on")
    base = write_run(d / "b", Cond("baseline"), qps=(4,), n=200, metrics=False)
    spec = write_run(
        d / "s", Cond("spec", speculative=SPEC, tpot=lambda q: 1.3), qps=(4,), n=200, metrics=False
    )
    return [str(base), str(spec)]


@pytest.fixture(scope="module")
def change(pair: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """The p95 TPOT change at 4 req/s in percent, as the report gives it: value, lo, hi."""
    out = tmp_path_factory.mktemp("figures")
    assert main(["compare", *pair, "--out", str(out), "--no-html", "--quiet"]) == 0
    [row] = json.loads((out / "report.json").read_text())["ratios"]["spec"]["tpot_p95"]
    assert row["effect"] == "hurts"
    return {k: (row[k] - 1) * 100 for k in ("value", "lo", "hi")}


def _gate(pair: list[str], out: Path, limit: float, *extra: str) -> int:
    return main(["compare", *pair, "--out", str(out), "--no-html", "--quiet",
                 "--max-regression", f"tpot_p95={limit:g}%", *extra])  # fmt: skip


def _gates_json(out: Path) -> dict[str, Any]:
    gates: dict[str, Any] = json.loads((out / "report.json").read_text())["gates"]
    return gates


def test_a_ci_that_straddles_the_limit_passes_as_a_possible_regression(
    pair: list[str], change: dict[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = round((change["lo"] + change["value"]) / 2, 1)  # the estimate beyond, the CI not
    capsys.readouterr()
    assert _gate(pair, tmp_path / "ci", limit) == 0
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("possible regression: ")]
    assert f"spec: tpot_p95 {change['value']:+.1f} % (CI {change['lo']:+.1f}…" in line
    assert f"exceeds the allowed +{limit:g} %" in line and "passes" in line
    assert "gate failed" not in err
    gates = _gates_json(tmp_path / "ci")
    assert gates["passed"] and gates["failures"] == []
    assert [p["message"] for p in gates["possible_regressions"]] == [line]
    md = (tmp_path / "ci" / "report.md").read_text()
    assert "pass (possible regression)" in md and line in md


def test_the_same_gate_on_the_point_estimate_fails(
    pair: list[str], change: dict[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = round((change["lo"] + change["value"]) / 2, 1)
    capsys.readouterr()
    assert _gate(pair, tmp_path / "point", limit, "--gate-on", "point") == 1
    err = capsys.readouterr().err
    assert "gate failed: spec: tpot_p95" in err and "(--gate-on point)" in err
    assert "possible regression" not in err


def test_a_ci_entirely_beyond_the_limit_fails(
    pair: list[str], change: dict[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert _gate(pair, tmp_path / "beyond", change["lo"] - 1) == 1
    err = capsys.readouterr().err
    assert "gate failed: spec: tpot_p95" in err and "with its whole CI" in err
    assert not _gates_json(tmp_path / "beyond")["passed"]


def test_a_limit_above_the_whole_ci_passes_silently(
    pair: list[str], change: dict[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert _gate(pair, tmp_path / "above", change["hi"] + 1) == 0
    assert "possible regression" not in capsys.readouterr().err
    assert _gates_json(tmp_path / "above")["possible_regressions"] == []


def test_a_bad_gate_on_is_exit_2(pair: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse's choices
        main(["compare", *pair, "--out", str(tmp_path / "r"), "--gate-on", "mean"])
    assert exc.value.code == 2


def _capacity(label: str, qps: float, reps: np.ndarray) -> Capacity:
    return Capacity(label, CROSSES, Boundary(qps), "tpot_p95", (2.0, 32.0), replicates=reps)


def test_capacity_replicates_beyond_the_range_leave_the_ci_open_not_narrow() -> None:
    """1 in 10 bootstrap replicates holds the SLO at every tested step (+inf): they stay in the
    CI, which is open above ("> +220 %": at least 32 against 10 req/s), where dropping them
    gave a narrow +20…+40 %."""
    rng = np.random.default_rng(0)
    cond = np.where(np.arange(1000) % 10 == 0, np.inf, rng.uniform(12.0, 14.0, 1000))
    change = capacity_change(_capacity("spec", 13.0, cond), _capacity("baseline", 10.0,
                             np.full(1000, 10.0)))  # fmt: skip
    assert change.value == pytest.approx(0.3)
    assert change.ci_beyond == ("", "above") and change.ci[1] == pytest.approx(2.2)
    assert change_text(change) == f"+30 % ({change.ci[0] * 100:+.0f}…>+220)"


def test_a_capacity_gate_judges_the_open_ci() -> None:
    """Spec carries 20 % less in nine replicates of ten and holds the SLO everywhere in the
    tenth: the loss is not significant with those replicates kept, so capacity=10 passes as a
    possible regression (it failed on the finite replicates alone); losing 50 % with the CI
    open below fails."""
    rng = np.random.default_rng(1)
    base = _capacity("baseline", 10.0, np.full(1000, 10.0))
    held = np.where(np.arange(1000) % 10 == 0, np.inf, rng.uniform(7.8, 8.2, 1000))
    cond = _capacity("spec", 8.0, held)
    result = capacity_gate(parse_gate("capacity=10"), {"baseline": base, "spec": cond},
                           {"spec": capacity_change(cond, base)}, "baseline", None)  # fmt: skip
    assert result.passed and len(result.possible) == 1
    assert gate_message(result.possible[0]).startswith("possible regression: spec: capacity")
    assert ">+220" in gate_message(result.possible[0])
    lost = np.where(np.arange(1000) % 10 == 0, -np.inf, rng.uniform(4.8, 5.2, 1000))
    cond = _capacity("spec", 5.0, lost)
    change = capacity_change(cond, base)
    assert change.ci_beyond == ("below", "") and change_text(change).startswith("-50 % (<")
    result = capacity_gate(parse_gate("capacity=10"), {"baseline": base, "spec": cond},
                           {"spec": change}, "baseline", None)  # fmt: skip
    assert not result.passed and "with its whole CI" in gate_message(result.failures[0])


def test_capacity_change_without_replicates_has_no_ci() -> None:
    empty = np.empty(0)
    change = capacity_change(_capacity("spec", 8.0, empty), _capacity("baseline", 10.0, empty))
    assert change == CapacityChange(pytest.approx(-0.2)) and change_text(change) == "-20 %"
