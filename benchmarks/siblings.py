"""A benchmark script beside this one, loaded by path, once per process.

``import coverage`` may find the PyPI package of that name first (pytest-cov brings it), so
the benchmarks that build on another load it by path. The module is registered as
``specload_<stem>_benchmark``, the name the tests' loader (``tests/benchmarks``) gives it, so
that one module serves both and worker processes can unpickle its functions by that name.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["sibling"]


def sibling(filename: str) -> ModuleType:
    """``benchmarks/<filename>``, executed on first use and reused after."""
    path = Path(__file__).resolve().with_name(filename)
    name = f"specload_{path.stem}_benchmark"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]
