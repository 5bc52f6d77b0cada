"""Tests of the benchmarks' machinery (the figures themselves are the benchmarks')."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from tests.conftest import REPO


def load_benchmark(filename: str) -> Any:
    """A script of ``benchmarks/`` loaded by path (``coverage`` is also a PyPI package's name);
    registered in ``sys.modules`` so its worker processes can unpickle its functions."""
    path = REPO / "benchmarks" / filename
    name = f"specload_{path.stem}_benchmark"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
