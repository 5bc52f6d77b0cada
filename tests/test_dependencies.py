"""pyproject.toml declares what specload/ imports, and an install from it runs.

An install that satisfies the declared requirements must be able to run every code path:
``client: openai`` once failed at run start because the code imported ``httpx2`` and the SDK's
``DefaultHttpx2Client`` while pyproject.toml declared ``openai>=1.40, httpx>=0.27``. So:

- every third-party top-level module that a file under specload/ imports (``import``,
  ``from ... import``, ``importlib.import_module("...")``) is declared, in the dependencies or
  in a user-facing extra (not ``dev``), and every declaration is imported somewhere;
- Locust, geventhttpclient and openai carry a tested range (both bounds), and what is
  installed here satisfies every declared range;
- (slow) a fresh venv with every extra, installed from a copy of the package, runs the code
  each extra is for: ``specload sim`` (uvloop), a ``specload run`` with ``client: openai``
  against it, NVML's module, a ``tokenizer.json`` read by ``specload inspect``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO, free_port, stop_process, wait_http

tomllib = pytest.importorskip("tomllib")

PKG = REPO / "specload"
#: distribution name (normalised) -> the module it installs, where they differ
MODULE_OF = {"pyyaml": "yaml", "nvidia_ml_py": "pynvml"}
#: extras that are for working on specload, not for using it
NOT_FOR_USERS = {"dev"}
TESTED_RANGES = ("locust", "geventhttpclient", "openai")


def _norm(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _requirements() -> dict[str, list[Requirement]]:
    """``""`` (the dependencies) and each extra -> its requirements."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {k: [Requirement(r) for r in v] for k, v in groups.items()}


def _declared() -> dict[str, Requirement]:
    """module -> requirement, over the dependencies and the user-facing extras."""
    out = {}
    for group, reqs in _requirements().items():
        if group in NOT_FOR_USERS:
            continue
        for r in reqs:
            out[MODULE_OF.get(_norm(r.name), _norm(r.name))] = r
    return out


def _imported_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def _third_party_imports() -> dict[str, set[str]]:
    """top-level module -> the files under specload/ that import it (stdlib left out)."""
    out: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        for name in _imported_names(ast.parse(path.read_text(), filename=str(path))):
            top = name.split(".")[0]
            if top != "specload" and top not in sys.stdlib_module_names:
                out.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return out


def test_every_third_party_import_is_declared_and_every_declaration_used() -> None:
    imported, declared = _third_party_imports(), _declared()
    missing = {m: sorted(files) for m, files in imported.items() if m not in declared}
    assert not missing, f"imported by specload/ but not in pyproject.toml: {missing}"
    unused = sorted(str(declared[m]) for m in set(declared) - set(imported))
    assert not unused, f"declared in pyproject.toml but imported nowhere in specload/: {unused}"


def test_tested_ranges_have_both_bounds_and_hold_for_what_is_installed() -> None:
    declared = {_norm(r.name): r for r in _declared().values()}
    for name in TESTED_RANGES:
        ops = {s.operator for s in declared[name].specifier}
        assert ">=" in ops and "<" in ops, f"{declared[name]}: expected >=TESTED,<NEXT_MAJOR"
    outside = []
    for req in declared.values():
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra not installed here (the slow test installs them all)
        if not req.specifier.contains(version, prereleases=True):
            outside.append(f"{req.name} {version} not in {req.specifier}")
    assert not outside, outside


# --- a fresh install --------------------------------------------------------------------------
SCENARIO = """\
name: fresh-install
client: openai
steps: [4]
step_duration_s: 1
warmup_s: 0
max_tokens: 8
prompts:
  synthetic: {input_tokens: 16, count: 8}
"""
#: what each extra is for, run in the fresh venv (the sim and the openai run come below)
EXTRA_CHECKS = {
    "openai": "from specload.client import ClientSettings; "
    "from specload.client.openai_mode import OpenAIStreamClient; "
    "OpenAIStreamClient('http://127.0.0.1:9', ClientSettings(concurrency=4)).close()",
    "gpu": "import importlib; importlib.import_module('pynvml')",
    "sim": "import uvloop; from specload.sim.main import _new_loop; "
    "assert type(_new_loop()).__module__.startswith('uvloop')",
    "tokenizer": (
        "from tokenizers import Tokenizer, models, pre_tokenizers; "
        "t = Tokenizer(models.WordLevel({'[UNK]': 0, 'hi': 1, 'there': 2}, unk_token='[UNK]')); "
        "t.pre_tokenizer = pre_tokenizers.Whitespace(); t.save('tok.json')"
    ),
}


def _copy_package(dest: Path) -> Path:
    """The files an sdist would hold: an install from them cannot see the working tree."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(PKG, dest / "specload", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _sh(cmd: list[str], cwd: Path, timeout_s: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
def test_a_fresh_venv_with_every_extra_runs_each_extras_code(tmp_path: Path) -> None:
    """One venv with all user-facing extras (one per extra took over two minutes each)."""
    extras = sorted(set(_requirements()) - NOT_FOR_USERS - {""})
    src = _copy_package(tmp_path / "src")
    venv = tmp_path / "venv"
    t0 = time.monotonic()
    _sh([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py, bin_ = str(venv / "bin" / "python"), venv / "bin"
    _sh([py, "-m", "pip", "install", "-q", f"{src}[{','.join(extras)}]"], tmp_path)
    install_s = time.monotonic() - t0
    work = tmp_path / "work"
    work.mkdir()
    assert set(extras) == set(EXTRA_CHECKS), f"each extra needs a check: {extras}"
    for extra in extras:
        _sh([py, "-c", EXTRA_CHECKS[extra]], work)
    (work / "p.jsonl").write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi there hi"}]}) + "\n"
    )
    inspect = _sh([str(bin_ / "specload"), "inspect", "p.jsonl", "--tokenizer", "tok.json"], work)
    assert "tokenizer" in inspect, inspect
    port = free_port()
    sim = subprocess.Popen(
        [str(bin_ / "specload"), "sim", "--host", "127.0.0.1", "--port", str(port)],
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=sim)
        (work / "s.yaml").write_text(SCENARIO)
        _sh(
            [str(bin_ / "specload"), "run", "--host", f"http://127.0.0.1:{port}", "--scenario",
             "s.yaml", "--label", "fresh", "--out", "out"],
            work,
        )  # fmt: skip
    finally:
        stop_process(sim)
    records = [json.loads(x) for x in (work / "out" / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["ok"] for r in records), records[:2]
    print(f"fresh venv with extras {extras}: installed in {install_s:.0f} s")
