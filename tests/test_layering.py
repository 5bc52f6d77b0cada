"""The import direction contract of docs/architecture.md, checked on the source.

A back-edge (the simulator importing the client, analysis importing Locust, ...) makes the
parts impossible to use alone: the simulator must run with nothing else, and compare must
work on run dirs from any server.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

PKG = Path(__file__).resolve().parent.parent / "specload"


def _floors() -> ModuleType:
    """``scripts/floors.py``: the floors table and the page's generated diagram."""
    spec = importlib.util.spec_from_file_location("floors", PKG.parent / "scripts" / "floors.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


floors = _floors()
_imports = floors.imported_modules


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
    forbidden = ("specload.client", "specload.locust", "specload.sim", "specload.core.pacer")
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
    assert (PKG / "core" / "records.py").exists()
    assert len(list(PKG.rglob("*.py"))) > 3


def test_every_package_imports_only_floors_below_its_own() -> None:
    edges = floors.package_edges()
    assert edges["metrics"] and edges["cli"], "the edges are read from the source"
    assert not floors.violations(edges), "\n".join(floors.violations(edges))


def test_analysis_rooms_import_only_rooms_below_their_own() -> None:
    edges = floors.room_edges()
    assert set(edges) == set(floors.ROOM), f"rooms without a floor: {set(edges) - set(floors.ROOM)}"
    assert edges["decisions"] >= {"statistics"}, "the edges are read from the source"
    assert not floors.room_violations(edges), "\n".join(floors.room_violations(edges))
    back = {k: set(v) for k, v in edges.items()} | {
        "statistics": edges["statistics"] | {"decisions"}
    }
    assert floors.room_violations(back) == [
        "statistics (room floor 1) imports decisions (room floor 2)"
    ]


def test_a_back_edge_is_named() -> None:
    # Guards the guard: metrics importing analysis (the edge this layout removed) is caught.
    edges = {k: set(v) for k, v in floors.package_edges().items()}
    edges["metrics"].add("analysis")
    assert floors.violations(edges) == ["metrics (floor 2) imports analysis (floor 3)"]


def test_the_architecture_page_shows_the_code_s_floors() -> None:
    page = floors.DOC.read_text()
    assert floors.BEGIN in page, "docs/architecture.md lost its floors diagram"
    assert floors.page_with_diagram(page) == page, "python scripts/floors.py --write"


def test_every_package_has_a_floor_and_the_top_holds_only_entry_points() -> None:
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert packages == set(floors.FLOOR), f"without a floor: {packages - set(floors.FLOOR)}"
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], (
        f"a module at the top of specload/ has no floor; put it in a package: {loose}"
    )


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
