"""One option table feeds ``specload run`` and Locust's parser; one function checks both."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specload.cli.main import build_parser
from specload.core.errors import ConfigError
from specload.options.gates import add_gate_options
from specload.options.run import RUN_OPTIONS, resolve_run_options


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[0]: a for a in parser._actions if a.option_strings}


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


#: Locust's parser, built in a child: importing locust monkey-patches the process it runs in
LOCUST_OPTIONS = """
import json
from locust.argument_parser import LocustArgumentParser
from specload.locust.plugin import add_options
p = LocustArgumentParser()
add_options(p)
print(json.dumps({a.option_strings[0]: [a.help, a.default, a.required]
                  for a in p._actions if a.option_strings}))
"""


def test_both_parsers_offer_the_shared_options_with_one_help_and_default() -> None:
    child = subprocess.run(
        [sys.executable, "-c", LOCUST_OPTIONS], capture_output=True, text=True, check=True
    )
    lo = json.loads(child.stdout)
    cli = _actions(_run_parser())
    shared = [o for o in RUN_OPTIONS if o.where == "both"]
    assert len(shared) >= 8
    for o in shared:
        assert cli[o.flag].help == lo[o.flag][0] == o.help, o.flag
        assert lo[o.flag][1] == o.default, o.flag
    assert "--out" in cli and "--out" not in lo and "--run-dir" in lo and "--run-dir" not in cli
    assert cli["--scenario"].required and not lo["--scenario"][2]


def _compare_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["compare"]


def test_the_gate_options_are_compares_own_on_locusts_command_line() -> None:
    """One definition (``options/gates.py``): the same flags, defaults and help on ``specload
    compare`` and on Locust (where ``--baseline-run`` runs compare with them at the end)."""
    child = subprocess.run(
        [sys.executable, "-c", LOCUST_OPTIONS], capture_output=True, text=True, check=True
    )
    lo = json.loads(child.stdout)
    mine = argparse.ArgumentParser()
    add_gate_options(mine)
    flags = [f for f in _actions(mine) if f != "-h"]
    assert flags == ["--operating-qps", "--max-regression", "--gate-on", "--slo", "--junit"]
    cmp = _actions(_compare_parser())
    for flag in flags:
        assert cmp[flag].default == lo[flag][1], flag
        assert lo[flag][0].startswith(str(cmp[flag].help).split(" (with --baseline-run")[0]), flag


def test_every_commands_error_budget_says_what_the_budget_is_in_one_wording() -> None:
    """run, sweep and compare each do something else with a step past the budget, but the
    budget is one concept: each help starts with ``core.budget.BUDGET_HELP``."""
    from specload.core.budget import BUDGET_HELP

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {
        c: str(_actions(sub.choices[c])["--max-error-rate"].help)
        for c in ("run", "sweep", "compare")
    }
    assert all(h.startswith(BUDGET_HELP) for h in helps.values()), helps
    assert "left out of every conclusion" in helps["compare"]
    assert "'degraded' (exit 1)" in helps["run"] and helps["sweep"].startswith(helps["run"])


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("speculative_config", "{not json", "--speculative-config"),
        ("gpu_metrics_url", "dcgm-host:9400", "--gpu-metrics-url"),
        ("max_error_rate", 1.5, "--max-error-rate"),
        ("scenario", "", "no scenario"),
        ("max_regression", ["tpot_p50=5"], "--max-regression: gates.*give --baseline-run"),
        ("junit", "ci.xml", "--junit: gates.*give --baseline-run"),
        ("operating_qps", -1.0, "--operating-qps -1: expected a load > 0"),
        ("slo", ["tpot=fast"], "--slo"),
    ],
)
def test_bad_input_is_one_config_error_whichever_way_the_run_started(
    tmp_path: Path, flag: str, value: object, message: str
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: m\nsteps: [1]\nstep_duration_s: 1\n")
    values = argparse.Namespace(
        scenario=str(scenario),
        label="x",
        speculative_config="",
        gpu_metrics_url="",
        max_error_rate=0.05,
        prefix_caching="",
        store_text=False,
        server_cmd="",
    )
    opts, _ = resolve_run_options(values, host="http://127.0.0.1:1/", run_dir=None, headless=True)
    assert opts.host == "http://127.0.0.1:1" and opts.run_dir == "runs/x"
    setattr(values, flag, value)
    with pytest.raises(ConfigError, match=message):
        resolve_run_options(values, host="http://127.0.0.1:1", run_dir=None, headless=True)


def test_a_gate_that_could_check_no_step_of_the_scenario_is_refused_before_traffic(
    tmp_path: Path,
) -> None:
    from analysis.synth_rundir import Cond, write_run

    base = write_run(tmp_path / "base", Cond("baseline"), qps=(2, 4), n=40, metrics=False)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: m\nsteps: [2, 4]\nstep_duration_s: 1\n")
    values = argparse.Namespace(
        scenario=str(scenario), label="x", baseline_run=str(base), max_regression=["tpot_p95=10"],
        operating_qps=1.0, junit=str(tmp_path / "x.xml"),
    )  # fmt: skip
    with pytest.raises(ConfigError) as err:
        resolve_run_options(values, host="http://127.0.0.1:1", run_dir=None, headless=False)
    assert str(err.value) == (
        "--operating-qps 1: no scenario step at or below it (scenario: 2, 4 req/s); the gate "
        "would check nothing"
    )
