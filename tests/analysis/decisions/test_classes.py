"""The answer per class of request (``analysis/decisions/classes.py`` through ``compare_runs``).

Synthetic runs with a known truth per class: in the speculative run, ``code`` requests are 30 %
faster at low load and lose the gain with load, ``chat`` requests are never faster. The
per-class verdicts must say so, by the same rule as the whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from specload.analysis.compare import compare_runs
from specload.analysis.decisions.classes import class_masks
from specload.analysis.inputs.run_columns import load_run
from specload.report.verdict_words import class_verdicts
from tests.analysis.synth_rundir import SPEC, Cond, linear_gain, write_run

QPS = (2.0, 4.0, 8.0, 16.0)


def _mixed(path: Path, parts: dict[str, Cond]) -> Path:
    """One run dir whose records are ``parts`` (category -> condition), merged."""
    lines: list[bytes] = []
    for i, (category, cond) in enumerate(parts.items()):
        one = write_run(path.parent / f"{path.name}-{category}", cond, qps=QPS, n=160, seed=i)
        for line in (one / "requests.jsonl").read_bytes().splitlines():
            r = orjson.loads(line)
            r["category"], r["request_id"] = category, f"{category}-{r['request_id']}"
            lines.append(orjson.dumps(r))
    path.mkdir()
    for name in ("run.json", "steps.json", "metrics.jsonl"):
        (path / name).write_bytes((one / name).read_bytes())
    (path / "requests.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Baseline and spec run dirs: spec's ``code`` gains 30 % at low load, ``chat`` never."""
    tmp = tmp_path_factory.mktemp("classes")
    base = _mixed(tmp / "base", {"code": Cond("baseline"), "chat": Cond("baseline")})
    spec = _mixed(
        tmp / "spec",
        {
            "code": Cond("spec", speculative=SPEC, tpot=linear_gain(0.3, 2.0, 0.15)),
            "chat": Cond("spec", speculative=SPEC),
        },
    )
    return [base, spec]


def test_each_class_gets_its_own_verdict_by_the_same_rule(pair: list[Path]) -> None:
    c = compare_runs(pair, bootstrap=300)
    by_name = {a.name: a for a in c.classes}
    assert set(by_name) == {"chat", "code"} and by_name["code"].kind == "category"
    code, chat = by_name["code"], by_name["chat"]
    assert code.n == {"baseline": 720, "spec": 720}  # 4 steps of 160 + 20 warm-up
    code_effects = [r.effect for r in code.ratios["spec"]["tpot_p50"]]
    assert code_effects[0] == "helps" and "helps" in class_verdicts(c, code)["spec"]
    assert all(r.effect != "helps" for r in chat.ratios["spec"]["tpot_p50"])
    assert "helps" not in class_verdicts(c, chat)["spec"].split(";")[0]
    # the whole mixes both: its gain at 2 req/s lies between the two classes'
    ratio = {a.name: a.ratios["spec"]["tpot_p50"][0].ratio.value for a in c.classes}
    whole = c.ratios["spec"]["tpot_p50"][0].ratio.value
    assert ratio["code"] < whole < ratio["chat"]


def test_without_categories_varying_lengths_split_at_the_median(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", Cond("baseline"), qps=QPS, n=60))
    kind, _, masks = class_masks([run])
    assert (kind, masks) == ("", {})  # one prompt length: no classes
    rng = np.random.default_rng(0)
    run.cols["prompt_tokens"] = rng.choice([100.0, 1000.0], size=run.n)
    run.cols["prompt_tokens"][0] = np.nan  # a failed request: in neither class
    kind, bounds, masks = class_masks([run])
    assert kind == "input_length" and set(masks) == {"short", "long"}
    short, long = masks["short"][0], masks["long"][0]
    assert not (short & long).any() and (short | long).sum() == run.n - 1
    assert np.all(run.cols["prompt_tokens"][long] > bounds["median_prompt_tokens"])


def test_the_reports_answer_per_class(pair: list[Path], tmp_path: Path) -> None:
    from specload.report import write_reports

    c = compare_runs(pair, bootstrap=200)
    paths = write_reports(c, tmp_path / "report")
    data = orjson.loads(paths["json"].read_bytes())
    code = data["classes"]["code"]
    assert code["kind"] == "category" and code["n"] == {"baseline": 720, "spec": 720}
    # the top level's shapes, per class
    assert set(code) >= {"verdict", "crossover", "steps", "ratios"}
    code_answer = next(a for a in c.classes if a.name == "code")
    assert code["verdict"]["spec"] == class_verdicts(c, code_answer)["spec"]
    assert (
        code["crossover"]["spec"]["tpot_p50"]["status"]
        == data["classes"]["code"]["crossover"]["spec"]["tpot_p50"]["status"]
    )
    assert code["ratios"]["spec"]["tpot_p50"][0]["effect"] == "helps"
    assert [s["target_qps"] for s in code["steps"]["baseline"]] == list(QPS)
    md = paths["md"].read_text()
    assert "Per class of request (the prompt file's category)" in md and "- `chat`: spec" in md
    html = paths["html"].read_text()
    assert "Per class of request" in html and "Change vs baseline per class" in html
    by_class = [a for a in data["advice"] if a["kind"] == "by_class"]
    assert len(by_class) == 1 and by_class[0]["figures"]["never"] == ["chat"]
    assert "draft for `code` requests only" in by_class[0]["text"]


def test_class_bounds_cut_prompt_lengths_into_named_classes(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "r", Cond("baseline"), qps=QPS, n=60))
    run.cols["prompt_tokens"] = np.resize(np.array([100.0, 512.0, 513.0, 3000.0]), run.n)
    kind, bounds, masks = class_masks([run], (512, 2048))
    assert kind == "input_length" and bounds == {"bound_0": 512.0, "bound_1": 2048.0}
    assert list(masks) == ["<=512", "513-2048", ">2048"]
    assert [int(m[0].sum()) for m in masks.values()] == [run.n // 2, run.n // 4, run.n // 4]
