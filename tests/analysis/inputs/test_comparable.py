"""Runs that differ in what must be fixed are refused, naming every difference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from analysis.synth_rundir import SPEC, Cond, scenario, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.inputs.comparable import (
    ConditionsDiffer,
    ValueDiffers,
    differences,
    key_differences,
    scenario_differences,
)
from specload.analysis.inputs.run_columns import load_runs
from specload.core.errors import ConfigError
from specload.protocol.provisional import write_view


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
    lines = str(exc.value).splitlines()
    assert lines[0].startswith("runs are not comparable") and "--force" in lines[0]
    assert lines[1:] == [
        "  target.model: 'm' in baseline | 'other' in spec",
        "  target.server_version: '0.26.0' in baseline | '0.27.0' in spec",
        "  scenario.max_tokens: None in baseline | 128 in spec",
    ]
    assert "3 keys differ" in lines[0]


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
    key = "scenario.sampling.max_tokens"
    assert cmp.forced and ValueDiffers(other, "spec", base, "baseline", key, 32, 64) in (
        cmp.differences
    )


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


def _folder_of_runs(root: Path) -> list[Path]:
    """Five runs in one folder: two repeats of the baseline, three conditions, one of which
    was sized differently and points at a prompt file with a very long path."""
    long_file = "prompts/" + "very-long-directory-name/" * 12 + "set.jsonl"
    other = scenario(
        max_tokens=128,
        prompts={"kind": "file", "file": long_file, "count": 200, "seed": 7},
    )
    return [
        write_run(root / "base-1", Cond("baseline"), qps=(2,), metrics=False),
        write_run(root / "base-2", Cond("baseline"), qps=(2,), metrics=False, seed=1),
        write_run(root / "spec", Cond("spec", speculative=SPEC), qps=(2,), metrics=False),
        write_run(root / "prefix", Cond("prefix", prefix_caching=True), qps=(2,), metrics=False),
        write_run(root / "odd", Cond("odd", speculative=SPEC), qps=(2,), metrics=False, sc=other),
    ]


def test_a_folder_of_runs_is_refused_with_one_short_line_per_differing_key(
    tmp_path: Path,
) -> None:
    _folder_of_runs(tmp_path / "runs")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "compare",
            str(tmp_path / "runs"),
            "--out",
            str(tmp_path / "r"),
            "--no-html",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("specload compare: error: runs are not comparable")
    assert "--force" in lines[0]
    keys = [x.split(":")[0].strip() for x in lines[1:]]
    assert keys == [
        "scenario.max_tokens",
        "scenario.prompts.file",
        "scenario.prompts.input_tokens",
        "scenario.prompts.kind",
    ]
    assert all(len(x) <= 160 for x in lines), max(lines, key=len)
    file_line = lines[keys.index("scenario.prompts.file") + 1]
    assert "…" in file_line and "very-long-directory-name/" * 3 not in file_line
    assert "None in baseline/base-1, baseline/base-2, prefix +1 more | " in file_line
    assert file_line.endswith(" in odd")
    assert "128 in odd" in lines[1] and str(tmp_path) not in proc.stderr


def test_key_differences_group_the_pairwise_differences_by_key(tmp_path: Path) -> None:
    runs = load_runs(list(_folder_of_runs(tmp_path / "runs")))
    by_key = {d.key: dict(d.values) for d in key_differences(runs)}
    assert by_key["scenario.max_tokens"] == {
        "baseline/base-1": None,
        "baseline/base-2": None,
        "spec": None,
        "prefix": None,
        "odd": 128,
    }
    pairwise = differences(runs)  # what a forced report keeps: each run against the first
    assert all(isinstance(d, ValueDiffers) for d in pairwise)
    assert {d.key for d in pairwise if isinstance(d, ValueDiffers)} == set(by_key)
    assert {(d.run, d.label, d.first) for d in pairwise if isinstance(d, ValueDiffers)} == {
        (runs[-1].path, "odd", runs[0].path)
    }


def test_same_label_with_different_conditions_is_refused_in_one_line_naming_both_runs(
    tmp_path: Path,
) -> None:
    a = write_run(tmp_path / "a", Cond("x"), qps=(2,), metrics=False)
    b = write_run(tmp_path / "b", Cond("x", speculative=SPEC), qps=(2,), metrics=False)
    with pytest.raises(ConfigError) as exc:
        compare_runs([a, b])
    lines = str(exc.value).splitlines()
    assert len(lines) == 2 and lines[1].startswith("  condition of label 'x': {")
    assert lines[1].endswith(" in x/b") and " in x/a | " in lines[1]
    (run_a, run_b) = load_runs([a, b])
    assert differences([run_a, run_b]) == [
        ConditionsDiffer(b, a, "x", run_b.meta.condition, run_a.meta.condition)
    ]


def _two_classes(run: Path, code_tokens: float = 150.0) -> Path:
    """Give a synthetic run a prompt file's two classes of very different lengths: code edits
    (``code_tokens``) and 13-token questions, mostly code in step 0 and mostly questions
    after, so the median over all classes jumps with the steps taken."""
    lines = []
    for line in (run / "requests.jsonl").read_bytes().splitlines():
        r = orjson.loads(line)
        code = r["prompt_index"] % 10 < (8 if r["step"] == 0 else 2)
        r["category"], r["prompt_tokens"] = ("code", code_tokens) if code else ("questions", 13)
        lines.append(orjson.dumps(r))
    (run / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return run


def test_prompt_lengths_are_compared_per_class_over_the_steps_both_runs_have(
    tmp_path: Path,
) -> None:
    """The live view (settled steps only) of a mixed prompt file against the whole baseline:
    the overall median would be 150 in one and 13 in the other; per class on the same steps
    they agree. A class whose prompts do differ is still refused, by name."""
    base = _two_classes(write_run(tmp_path / "b", Cond("baseline"), qps=(2, 4, 8), n=60))
    spec = _two_classes(write_run(tmp_path / "s", Cond("spec", speculative=SPEC), n=60))
    view = write_view(spec, tmp_path / "view", {0})
    assert compare_runs([base, view], bootstrap=50).differences == []
    longer = _two_classes(write_run(tmp_path / "l", Cond("spec", speculative=SPEC), n=60), 300)
    with pytest.raises(ConfigError) as exc:
        compare_runs([base, write_view(longer, tmp_path / "view2", {0})])
    assert "  median prompt_tokens (code): 150 in baseline | 300 in spec" in str(exc.value)
    assert "questions" not in str(exc.value)


def test_scenario_differences_are_the_keys_that_must_match() -> None:
    sc = scenario()
    other = {**sc, "max_tokens": 1, "steps": [1, 2]}  # steps may differ, max_tokens may not
    assert scenario_differences(sc, other) == ["max_tokens"]
    nested = {**sc, "sampling": {**sc["sampling"], "temperature": 0.7}, "warmup_s": 1}
    assert scenario_differences(sc, nested) == ["sampling.temperature"]
    assert scenario_differences(sc, dict(sc)) == []
