"""The import direction contract of docs/architecture.md, checked on the source.

A back-edge (the simulator importing the client, analysis importing Locust, ...) makes the
parts impossible to use alone: the simulator must run with nothing else, and compare must
work on run dirs from any server.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "specload"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py")) if (PKG / sub).exists() else []


def test_simulator_imports_nothing_outside_sim() -> None:
    bad = {
        f"{p.relative_to(PKG)}: {name}"
        for p in _modules("sim")
        for name in _imports(p)
        if name.startswith("specload") and not name.startswith("specload.sim")
    }
    assert not bad, f"specload/sim must be self-contained: {sorted(bad)}"


def test_only_locust_and_cli_packages_import_locust() -> None:
    bad = []
    for p in sorted(PKG.rglob("*.py")):
        top = p.relative_to(PKG).parts[0]
        if top in ("locust", "cli"):
            continue
        if any(n == "locust" or n.startswith("locust.") for n in _imports(p)):
            bad.append(str(p.relative_to(PKG)))
    assert not bad, f"only specload/locust and specload/cli may import locust: {bad}"


def test_analysis_and_report_do_not_depend_on_load_generation() -> None:
    forbidden = ("specload.client", "specload.locust", "specload.sim", "specload.pacer")
    bad = {
        f"{p.relative_to(PKG)}: {name}"
        for sub in ("analysis", "report")
        for p in _modules(sub)
        for name in _imports(p)
        if name.startswith(forbidden)
    }
    assert not bad, f"analysis/report must work on run dirs from any server: {sorted(bad)}"


def test_the_layering_check_sees_the_package() -> None:
    # Guards the guards: if the package moved, the checks above would pass vacuously.
    assert (PKG / "records.py").exists()
    assert len(list(PKG.rglob("*.py"))) > 3


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _specload_edges(path: Path, known: set[str]) -> set[str]:
    """Every specload module ``path`` imports, wherever the import is (a function body, an
    ``if TYPE_CHECKING:`` block): a cycle through any of them is still a cycle to a reader."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in known:
                out.add(node.module)
            out.update(
                f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known
            )
    return out


def test_no_import_cycles_between_modules() -> None:
    """One-way dependencies between modules too: compare's model lives apart from compare,
    the plugin's roles in a registry the shape, users and web UI read."""
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    known = set(files)
    graph = {m: _specload_edges(p, known) - {m} for m, p in files.items()}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)
