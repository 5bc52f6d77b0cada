"""Runs that differ in what must be fixed are refused, naming every difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.synth_rundir import SPEC, Cond, scenario, write_run
from specload.analysis.compare import compare_runs
from specload.errors import ConfigError


def test_different_model_version_and_lengths_are_refused_with_the_differences(
    tmp_path: Path,
) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), metrics=False)
    other = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC),
        qps=(2,),
        metrics=False,
        model="other",
        server_version="0.27.0",
        sc=scenario(max_tokens=128),
    )
    with pytest.raises(ConfigError) as exc:
        compare_runs([base, other])
    msg = str(exc.value)
    assert "\n" not in msg and "--force" in msg
    assert "target.model 'other' != 'm'" in msg
    assert "target.server_version '0.27.0' != '0.26.0'" in msg
    assert "scenario.max_tokens 128 != None" in msg


def test_force_compares_anyway_and_keeps_the_differences(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), metrics=False)
    other = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC),
        qps=(2,),
        metrics=False,
        sc=scenario(sampling={"temperature": 0.0, "max_tokens": 32}),
    )
    cmp = compare_runs([base, other], force=True)
    assert cmp.forced and any("scenario.sampling.max_tokens 32 != 64" in d for d in cmp.differences)


def test_names_paths_and_step_lists_may_differ(tmp_path: Path) -> None:
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), metrics=False)
    other = write_run(
        tmp_path / "s",
        Cond("spec", speculative=SPEC),
        qps=(2,),
        metrics=False,
        sc=scenario(path="elsewhere.yaml", steps=[2, 4, 8], repeats=3, name="x"),
    )
    assert compare_runs([base, other]).differences == []


def test_same_label_with_different_conditions_is_refused(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", Cond("x"), qps=(2,), metrics=False)
    b = write_run(tmp_path / "b", Cond("x", speculative=SPEC), qps=(2,), metrics=False)
    with pytest.raises(ConfigError, match="share label 'x' but declare different conditions"):
        compare_runs([a, b])
