"""Scenario loading: defaults, step ladders, repeats, and one-line errors with key paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specload.analysis.statistics.stats import MIN_STARTS_FOR_CONFIG
from specload.core.errors import ConfigError
from specload.scenario import Scenario, StepPlan, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str) -> ConfigError:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_scenario(p)
    return exc.value


def test_minimal_scenario_fills_defaults(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "steps: [1, 2]\n", name="tiny.yaml"))
    assert s.name == "tiny"
    assert s.steps == (1.0, 2.0)
    assert (s.model, s.temperature, s.ignore_eos, s.arrival, s.client) == (
        None,
        0.0,
        True,
        "poisson",
        "fast",
    )
    assert s.min_tokens == s.max_tokens == 256  # fixed output length by default
    assert s.prompts.kind == "synthetic" and s.prompts.input_tokens == 512
    assert s.contract is None and s.stream and s.record_itl
    assert s.source == str(tmp_path / "tiny.yaml")


def test_min_tokens_default_follows_ignore_eos(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "steps: [1]\nmax_tokens: 64\nignore_eos: false\n"))
    assert s.min_tokens is None
    s = load_scenario(write(tmp_path, "steps: [1]\nmax_tokens: 64\n"))
    assert s.min_tokens == 64


def test_geometric_ladder_from_to_factor(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "steps: {from: 1, to: 32, factor: 2}\n"))
    assert s.steps == (1, 2, 4, 8, 16, 32)


def test_ladder_appends_to_when_the_series_misses_it(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "steps: {from: 1, to: 20, factor: 3}\n"))
    assert s.steps == (1, 3, 9, 20)
    s = load_scenario(write(tmp_path, "steps: {from: 4, to: 16, by: 4}\n"))
    assert s.steps == (4, 8, 12, 16)


def test_schedule_replays_whole_ladder_per_repeat(tmp_path: Path) -> None:
    s = load_scenario(
        write(tmp_path, "steps: [1, 4]\nrepeats: 2\nstep_duration_s: 5\nwarmup_s: 1\n")
    )
    assert s.schedule() == [
        StepPlan(0, 0, 1.0, 5.0, 1.0),
        StepPlan(1, 0, 4.0, 5.0, 1.0),
        StepPlan(2, 1, 1.0, 5.0, 1.0),
        StepPlan(3, 1, 4.0, 5.0, 1.0),
    ]
    assert s.schedule()[0].total_s == 6.0
    assert sum(p.total_s for p in s.schedule()) == 24.0


def test_overrides_accept_dotted_paths_and_are_validated(tmp_path: Path) -> None:
    p = write(tmp_path, "steps: [1]\nprompts: {synthetic: {input_tokens: 100}}\n")
    s = load_scenario(p, {"steps": [3, 6], "prompts.synthetic.count": 7})
    assert s.steps == (3.0, 6.0)
    assert s.prompts.count == 7 and s.prompts.input_tokens == 100
    with pytest.raises(ConfigError) as exc:
        load_scenario(p, {"prompts.synthetic.count": 0})
    assert exc.value.path == "prompts.synthetic.count"


def test_to_dict_round_trips_through_json(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            "steps: {from: 1, to: 8, factor: 2}\nstop: ['\\n']\n"
            "contract: {json: true, required_fields: [a]}\n",
        )
    )
    back = parse_scenario(json.loads(json.dumps(s.to_dict())))
    assert back == s


def test_file_prompts_resolve_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    line = '{"messages": [{"role": "user", "content": "hi"}]}\n'
    (tmp_path / "data" / "p.jsonl").write_text(line)
    s = load_scenario(write(tmp_path, "steps: [1]\nprompts: {file: data/p.jsonl}\n"))
    assert s.prompts.kind == "file"
    assert s.prompts.file == str((tmp_path / "data" / "p.jsonl").resolve())


@pytest.mark.parametrize(
    ("text", "path", "expect"),
    [
        ("steps: [1, 0]\n", "steps[1]", "expected a number > 0"),
        ("steps: [1, 2, 'fast']\n", "steps[2]", "expected a number"),
        ("steps: [1]\ntemprature: 0\n", "temprature", "unknown key"),
        ("steps: [1]\narrival: bursty\n", "arrival", "expected one of: constant, poisson"),
        ("steps: [1]\nmax_tokens: 8\nmin_tokens: 9\n", "min_tokens", "expected <= max_tokens"),
        ("steps: {from: 1, to: 8}\n", "steps", "exactly one of factor"),
        ("steps: {from: 1, to: 8, factor: 1}\n", "steps.factor", "expected a number > 1"),
        ("steps: {from: 4, to: 2, factor: 2}\n", "steps.to", "expected a number >= 4"),
        ("max_tokens: 3\n", "steps", "missing"),
        ("steps: [1]\nrepeats: 1.5\n", "repeats", "expected an integer"),
        ("steps: [1]\nignore_eos: 'yes'\n", "ignore_eos", "expected true or false"),
        (
            "steps: [1]\nprompts: {synthetic: {input_tokens: 10, shared_prefix_tokens: 10}}\n",
            "prompts.synthetic.shared_prefix_tokens",
            "expected fewer than input_tokens",
        ),
        (
            "steps: [1]\nprompts: {synthetic: {repetition: 1.5}}\n",
            "prompts.synthetic.repetition",
            "expected a number <= 1",
        ),
        (
            "steps: [1]\nprompts: {synthetic: {inputs: 5}}\n",
            "prompts.synthetic.inputs",
            "unknown key",
        ),
        ("steps: [1]\nprompts: {file: nope.jsonl}\n", "prompts.file", "not found"),
        ("steps: [1]\nprompts: {}\n", "prompts", "exactly one of synthetic or file"),
        (
            "steps: [1]\ncontract: {required_fields: [a]}\n",
            "contract.required_fields",
            "needs contract.json",
        ),
        ("steps: [1]\nclient: requests\n", "client", "expected one of: fast, openai"),
    ],
)
def test_bad_values_name_file_key_path_and_expectation(
    tmp_path: Path, text: str, path: str, expect: str
) -> None:
    err = error_of(tmp_path, text)
    assert err.path == path
    assert err.file == str(tmp_path / "s.yaml")
    line = str(err)
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 's.yaml'}: {path}: ")
    assert expect in line


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("steps: [1]\nstep_duraton_s: 3\n", "did you mean 'step_duration_s'?"),
        ("steps: [1]\nmax_tokens: {dist: normal, mean: 9, stdev: 1}\n", "did you mean 'stddev'?"),
        ("steps: [1]\nconversation: {turns: 2, think_time: 1}\n", "did you mean 'think_time_s'?"),
        ("steps: [1]\nzzz: 1\n", ""),
    ],
)
def test_a_typo_gets_the_closest_key_and_only_keys_a_person_writes(
    tmp_path: Path, text: str, hint: str
) -> None:
    line = str(error_of(tmp_path, text))
    assert "unknown key (" in line and (hint in line if hint else "did you mean" not in line)
    listed = line.split("expected one of: ")[1]
    assert "trace_info" not in listed and "source" not in listed


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    err = error_of(tmp_path, "steps: [1, 2\nname: x\n")
    assert "line 2" in str(err) and "column" in str(err)
    assert err.file == str(tmp_path / "s.yaml")


def test_non_mapping_top_level_and_missing_file(tmp_path: Path) -> None:
    assert "expected a mapping" in str(error_of(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_scenario(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    "name", ["smoke", "low-to-medium", "prefix-heavy", "code-repetitive", "ci"]
)
def test_shipped_scenarios_load(name: str) -> None:
    s = load_scenario(REPO / "scenarios" / f"{name}.yaml")
    assert isinstance(s, Scenario) and s.steps


def test_low_to_medium_is_the_seed_protocol() -> None:
    s = load_scenario(REPO / "scenarios" / "low-to-medium.yaml")
    assert s.steps[0] <= 1 and s.steps[-1] >= 24
    assert s.repeats >= 2 and s.warmup_s > 0 and s.ignore_eos
    assert s.replicates >= MIN_STARTS_FOR_CONFIG  # an interval about the config beside
    assert (s.prompts.input_tokens, s.max_tokens, s.min_tokens) == (512, 256, 256)


def test_smoke_runs_in_seconds() -> None:
    smoke = load_scenario(REPO / "scenarios" / "smoke.yaml")
    assert sum(p.total_s for p in smoke.schedule()) <= 20


def test_specload_scenario_import_needs_no_locust() -> None:
    code = (
        "import sys, specload.scenario, specload.core.pacer, specload.scenario.prompts; "
        "print('locust' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "False"


def test_slo_in_the_scenario_is_validated_with_its_key_path(tmp_path: Path) -> None:
    ok = load_scenario(write(tmp_path, "steps: [1]\nslo: {tpot_p95: 25ms, e2e_p99: 8s}\n"))
    assert ok.slo == {"tpot_p95": "25ms", "e2e_p99": "8s"} and ok.to_dict()["slo"] == ok.slo
    err = error_of(tmp_path, "steps: [1]\nslo: {tpot_p95: 25}\n")
    assert err.path == "slo.tpot_p95" and "with a unit" in str(err)
    err = error_of(tmp_path, "steps: [1]\nslo: {queue_p95: 1s}\n")
    assert err.path == "slo.queue_p95" and "tpot_p95" in str(err)
    err = error_of(tmp_path, "steps: [1]\nprompts: {synthetic: {exact_tokens: maybe}}\n")
    assert err.path == "prompts.synthetic.exact_tokens"


def test_gamma_arrivals_take_a_burstiness_and_other_arrivals_refuse_it(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, "steps: [4]\narrival: gamma\nburstiness: 0.25\n"))
    assert (s.arrival, s.burstiness) == ("gamma", 0.25)
    assert load_scenario(write(tmp_path, "steps: [4]\narrival: gamma\n")).burstiness == 1.0
    path = write(tmp_path, "steps: [4]\narrival: poisson\nburstiness: 2\n", name="b.yaml")
    with pytest.raises(ConfigError) as exc:
        load_scenario(path)
    assert str(exc.value).startswith(f"{path}: burstiness: applies to arrival: gamma only")
    with pytest.raises(ConfigError, match="burstiness: .*expected a number > 0"):
        load_scenario(write(tmp_path, "steps: [4]\narrival: gamma\nburstiness: 0\n", name="c"))


def test_class_bounds_are_increasing_prompt_lengths_and_not_part_of_comparability(
    tmp_path: Path,
) -> None:
    from specload.analysis.inputs.comparable import flatten

    s = load_scenario(write(tmp_path, "steps: [4]\nclass_bounds: [512, 2048]\n"))
    assert s.class_bounds == (512, 2048) and "class_bounds" not in flatten(s.to_dict())
    with pytest.raises(ConfigError, match="class_bounds: .*expected increasing"):
        load_scenario(write(tmp_path, "steps: [4]\nclass_bounds: [2048, 512]\n", name="b"))
