"""specload's embedded vLLM-compatible simulator (``specload sim``).

Self-contained: nothing here imports from ``specload`` outside ``specload.sim``. An aiohttp
server (``server.py``) in front of a continuous-batching engine model (``engine.py``) whose step
times come from a calibrated roofline (``costmodel.py``, ``profiles/``), with speculative
decoding (``spec.py``), a prefix cache (``kvcache.py``) and deterministic lossless text
(``textgen.py``). See docs/simulator.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Engine",
    "EngineConfig",
    "Profile",
    "SimSettings",
    "SpecConfig",
    "build_app",
    "list_profiles",
    "load_profile",
    "parse_spec_config",
]

# Lazy: ``import specload.sim.flags`` (the CLI's --help) must not import aiohttp and the engine.
_HOME = {
    "Engine": "engine",
    "EngineConfig": "engine",
    "Profile": "profiles",
    "SimSettings": "server",
    "SpecConfig": "spec",
    "build_app": "server",
    "list_profiles": "profiles",
    "load_profile": "profiles",
    "parse_spec_config": "spec",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"specload.sim.{_HOME[name]}"), name)
    raise AttributeError(f"module 'specload.sim' has no attribute {name!r}")
