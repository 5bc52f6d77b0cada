"""Which condition is the baseline: one rule (``core.condition.choose_baseline``), decided
before any traffic by ``specload sweep`` and applied again by ``specload compare``."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specload.cli import sweep as sweep_cli
from specload.core.condition import choose_baseline
from specload.core.errors import ConfigError

SPEC = '--speculative-config {"method":"ngram","num_speculative_tokens":4}'


def test_the_condition_labelled_baseline_wins_wherever_it_was_given() -> None:
    assert choose_baseline({"spec": True, "baseline": None}) == "baseline"
    assert choose_baseline({"spec": True, "baseline": None}, "baseline") == "baseline"


def test_else_the_one_named_else_the_first_given() -> None:
    assert choose_baseline({"a": None, "b": None}) == "a"
    assert choose_baseline({"a": None, "b": None}, "b") == "b"
    assert choose_baseline({"plain": False, "spec": True}) == "plain"
    assert choose_baseline({"spec-k4": True, "spec-k8": True}) == "spec-k4"


@pytest.mark.parametrize(
    ("speculates", "requested", "named"),
    [
        ({"baseline": False, "spec": True}, "spec", "labelled 'baseline'"),
        ({"a": False, "b": True}, "c", "'c' is no condition (conditions: a, b)"),
        ({"spec": True, "plain": False}, None, "'spec', given first, runs speculative"),
        ({"spec": True, "other": None}, None, "'other' does not say so"),
    ],
)
def test_a_choice_that_reads_two_ways_is_exit_2_naming_it(
    speculates: dict[str, bool | None], requested: str | None, named: str
) -> None:
    with pytest.raises(ConfigError, match="--baseline") as err:
        choose_baseline(speculates, requested)
    assert named in str(err.value)
    assert err.value.exit_code == 2


def _plan(tmp_path: Path, *argv: str):  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser()
    sweep_cli.add_parser(parser.add_subparsers())
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nsteps: [2]\nstep_duration_s: 2\n")
    common = ["--scenario", str(scenario), "--out", str(tmp_path / "out"), "--skip-preflight"]
    return sweep_cli._plan(parser.parse_args(["sweep", *argv, *common]))


def test_sweep_keeps_the_order_typed_across_url_and_condition(tmp_path: Path) -> None:
    """The README's --url form: a --condition declaring spec's flags typed after the urls
    (or before them) does not make spec the baseline."""
    urls = ["--url", "plain=http://127.0.0.1:9", "--url", "spec=http://127.0.0.1:9"]
    for argv in ([*urls, "--condition", f"spec={SPEC}"], ["--condition", f"spec={SPEC}", *urls]):
        plan = _plan(tmp_path, "--interleave", *argv, "--baseline", "plain")
        assert plan.baseline == "plain"
    plan = _plan(tmp_path, "--interleave", *urls)
    assert [c.name for c in plan.conditions] == ["plain", "spec"]
    assert plan.baseline == "plain"


def test_sweep_refuses_a_spec_condition_typed_first_before_any_traffic(tmp_path: Path) -> None:
    cmd = "vllm serve m --port {port}"
    with pytest.raises(ConfigError, match="'spec', given first"):
        _plan(tmp_path, "--server-cmd", cmd, "--condition", f"spec={SPEC}", "--condition", "p=")
    assert not (tmp_path / "out").exists()
    plan = _plan(tmp_path, "--server-cmd", cmd, "--condition", "p=", "--condition", f"spec={SPEC}")
    assert plan.baseline == "p"
