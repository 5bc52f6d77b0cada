"""specload's embedded vLLM-compatible simulator (``specload sim``).

Self-contained: nothing here imports from ``specload`` outside ``specload.sim``. An aiohttp
server (``server.py``) in front of a continuous-batching engine model (``engine.py``) whose step
times come from a calibrated roofline (``costmodel.py``, ``profiles/``), with speculative
decoding (``spec.py``), a prefix cache (``kvcache.py``) and deterministic lossless text
(``textgen.py``). See docs/simulator.md.
"""

from specload.sim.engine import Engine, EngineConfig
from specload.sim.profiles import Profile, list_profiles, load_profile
from specload.sim.server import SimSettings, build_app
from specload.sim.spec import SpecConfig, parse_spec_config

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
