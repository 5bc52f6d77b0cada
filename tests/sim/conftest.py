"""One simulator shared by a module's read-only tests (saves a process start per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import SimServer, start_sim


@pytest.fixture(scope="module")
def shared_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimServer]:
    """A ``--profile tiny`` simulator for tests that change no server state.

    Retried once: the free port it was given can be taken by a neighbour's test before it binds.
    """
    log_dir = tmp_path_factory.mktemp("sim")
    try:
        s = start_sim("--profile", "tiny", log_dir=log_dir)
    except RuntimeError:
        s = start_sim("--profile", "tiny", log_dir=log_dir)
    yield s
    s.stop()
