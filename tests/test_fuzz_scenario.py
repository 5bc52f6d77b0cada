"""Random and mutated scenario YAML never shows a traceback: the loader either returns a
``Scenario`` or raises one ``ConfigError`` line that names the file (and, for a document
that parses to a mapping, the key path); ``specload run`` turns it into exit 2.

Three sources of input: random documents built from the schema's own keys with random
values (reaches deep validation), byte-level mutations of the shipped scenarios (reaches the
YAML parser's error paths), and plain random text.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specload.cli.main import main
from specload.core.errors import ConfigError
from specload.scenario import load_scenario
from specload.scenario.parse import _TOP_KEYS
from tests.conftest import examples

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted((REPO / "scenarios").glob("*.yaml"))
SEEDS = [p.read_bytes() for p in SHIPPED]
SUB_KEYS = [
    "synthetic",
    "file",
    "count",
    "input_tokens",
    "shared_prefix_tokens",
    "repetition",
    "from",
    "to",
    "factor",
    "by",
    "json",
    "required_fields",
    "tools",
]
FUZZ = settings(
    max_examples=examples(100),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.integers(-3, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["poisson", "constant", "fast", "openai", "x.jsonl", "2020-01-01"]),
)
keys = st.one_of(
    st.sampled_from(sorted(_TOP_KEYS) + SUB_KEYS), st.text(max_size=6), st.integers(0, 3)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)
documents = st.dictionaries(
    st.sampled_from(sorted(_TOP_KEYS) + ["max_concurency"]), values, max_size=8
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A shipped scenario with a few bytes deleted, replaced or inserted, or truncated."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["del", "set", "ins", "cut"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "del":
            del data[i : i + draw(st.integers(1, 8))]
        elif op == "set" and data:
            data[i] = draw(st.sampled_from(b":-[]{}#&*!|>'\"\t\n ,0x9e.%@`"))
        elif op == "ins":
            data[i:i] = draw(st.binary(min_size=1, max_size=6))
        else:
            data = data[:i]
    return bytes(data)


def check_loader(path: Path) -> ConfigError | None:
    """Load ``path``; any exception but one single-line ``ConfigError`` fails the test."""
    try:
        load_scenario(path)
    except ConfigError as exc:
        msg = str(exc)
        assert "\n" not in msg and "Traceback" not in msg, msg
        assert msg.startswith(f"{path}: "), msg
        assert len(msg) < 600, msg
        return exc
    return None


def first_key(key_path: str) -> str:
    return re.split(r"[.\[]", key_path, maxsplit=1)[0]


@FUZZ
@given(doc=documents)
def test_random_documents_give_a_scenario_or_one_line_naming_the_key(
    tmp_path: Path, doc: dict
) -> None:
    p = tmp_path / "fuzz.yaml"
    p.write_text(yaml.safe_dump(doc, allow_unicode=True))
    exc = check_loader(p)
    if exc is not None:
        assert exc.path, f"no key path in {exc}"
        assert first_key(exc.path) in set(map(str, doc)) | {"steps"}, exc


@FUZZ
@given(data=mutated())
def test_mutated_shipped_scenarios_never_raise_anything_but_config_error(
    tmp_path: Path, data: bytes
) -> None:
    p = tmp_path / "mutated.yaml"
    p.write_bytes(data)
    exc = check_loader(p)
    if exc is not None and exc.path:
        raw = yaml.safe_load(data.decode("utf-8")) or {}
        assert isinstance(raw, dict) and first_key(exc.path) in set(map(str, raw)) | {"steps"}


@FUZZ
@given(text=st.text(max_size=200))
def test_random_text_never_raises_anything_but_config_error(tmp_path: Path, text: str) -> None:
    p = tmp_path / "text.yaml"
    p.write_text(text, encoding="utf-8")
    check_loader(p)


@pytest.mark.parametrize(
    "text",
    [
        "steps: [" + "9" * 5000 + "]\n",  # int() refuses > 4300 digits inside yaml
        "steps: [" + "9" * 400 + "]\n",  # math.isfinite overflows
        "steps: [1]\nextra_body: &a {x: *a}\n",  # a self-referencing anchor
        "steps: [1]\nextra_body: {d: 2020-01-01}\n",  # a YAML date is not JSON
        "steps: [1]\nextra_body: {seed: " + "9" * 30 + "}\n",  # orjson cannot send it
        "steps: [1]\ncontract: {json: true, tools: [{a: .nan}]}\n",
        "\xff\xfe",
    ],
)
def test_inputs_that_once_escaped_as_tracebacks_are_one_line(tmp_path: Path, text: str) -> None:
    p = tmp_path / "regress.yaml"
    p.write_text(text, encoding="utf-8", errors="surrogateescape")
    assert check_loader(p) is not None


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``specload.cli.main.main(argv)`` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@settings(
    max_examples=examples(25),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.one_of(mutated(), documents.map(lambda d: yaml.safe_dump(d).encode())))
def test_specload_run_with_a_bad_scenario_exits_2_with_one_line(
    tmp_path: Path, data: bytes
) -> None:
    """Through the CLI; ``--out`` under a file, so even a valid scenario stops (exit 2)
    before any traffic."""
    p = tmp_path / "cli.yaml"
    p.write_bytes(data)
    (tmp_path / "afile").write_text("x")
    code, out, err = run_cli(
        [
            "run",
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(p),
            "--label",
            "l",
            "--out",
            str(tmp_path / "afile" / "run"),
        ]
    )
    assert code == 2 and out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specload run: error: "), lines
    assert str(p) in lines[0] or "--out" in lines[0] or "afile" in lines[0], lines


def test_specload_run_bad_scenario_in_a_subprocess_exits_2_without_traceback(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nsteps: [1]\nprompts: {synthetic: {input_tokens: 8, shared_prefix_tokens: 9}}\n"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "specload",
            "run",
            "--host",
            "http://127.0.0.1:9",
            "--scenario",
            str(bad),
            "--label",
            "l",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0]
    assert "prompts.synthetic.shared_prefix_tokens" in lines[0]
    assert not (tmp_path / "o").exists()
