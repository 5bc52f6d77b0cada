"""Engine profiles as data: hardware and model constants behind the step-time model.

Profiles live as YAML files in ``specload/sim/profiles/``; ``h200-llama8b`` is calibrated
against vLLM 0.26 on one H200 (see docs/simulator.md and benchmarks/calibrate_sim.py) and
``tiny`` makes steps of a few milliseconds so tests finish in seconds. Every field is in SI
units: bytes, bytes/s, FLOPs, FLOP/s, seconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

__all__ = ["PROFILE_DIR", "Profile", "list_profiles", "load_profile"]

PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True)
class Profile:
    """Constants of the step-time model (see ``costmodel.step_time``)."""

    name: str
    description: str = ""
    # Capacity and scheduler defaults (vLLM flag equivalents).
    block_size: int = 16
    kv_cache_tokens: int = 849_000
    kv_cache_tokens_spec: int = 666_000
    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192
    max_model_len: int = 4096
    # Target model: memory side.
    weight_bytes: float = 16.06e9
    kv_bytes_per_token: float = 131_072.0
    mem_bw_Bps: float = 3.6e12
    # Target model: compute side.
    flops_per_token: float = 14.5e9
    attn_flops_per_token_ctx: float = 524_288.0
    peak_flops: float = 6.0e14
    roofline_p: float = 3.0
    # Fixed costs. ``frontend_delay_s``: API server time before a request reaches the engine.
    frontend_delay_s: float = 0.0
    step_overhead_s: float = 1.5e-3
    per_seq_overhead_s: float = 20e-6
    prefill_seq_overhead_s: float = 0.0
    # Speculative decoding.
    draft_weight_bytes: float = 2.47e9
    draft_flops_per_token: float = 2.5e9
    draft_step_overhead_s: float = 0.4e-3
    draft_per_seq_overhead_s: float = 5e-6
    spec_step_overhead_s: float = 0.5e-3
    spec_per_seq_overhead_s: float = 10e-6
    verify_flops_scale: float = 1.0
    ngram_step_overhead_s: float = 0.1e-3
    dynamic_step_overhead_s: float = 0.0
    dynamic_per_seq_overhead_s: float = 0.0
    # What ``--start-jitter calibrated`` draws per server start (``host.py``): the host factor
    # on speculation's launch-bound costs, lognormal with median 1 and this sigma of its log;
    # with ``slow_window_prob``, one window of ``slow_window_s`` starting in the first
    # ``slow_window_latest_s`` seconds, inside which that cost is x ``slow_window_factor``.
    # Calibrated on four H200 hosts by benchmarks/sim_hosts.py (docs/simulator.md).
    start_jitter_sigma: float = 0.3
    slow_window_prob: float = 0.3
    slow_window_s: float = 15.0
    slow_window_factor: float = 2.4
    slow_window_latest_s: float = 120.0
    # What ``--spec-regime calibrated`` runs (``regime.py``): fast and slow windows alternate
    # for the whole server life, exponential lengths with these means (s); inside a slow one
    # speculation's launch-bound cost is x ``spec_regime_factor``. Fitted by
    # benchmarks/calibrate_sim.py to the H200 regime data (benchmarks/data/h200-regime.json).
    spec_regime_mean_fast_s: float = 4.7
    spec_regime_mean_slow_s: float = 3.2
    spec_regime_factor: float = 2.31

    def with_overrides(self, **kw: Any) -> Profile:
        """A copy with some fields replaced (calibration, tests)."""
        return dataclasses.replace(self, **kw)


def list_profiles() -> list[str]:
    """Names of the bundled profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str) -> Profile:
    """Load a bundled profile by name, or a YAML file by path; ``ValueError`` on bad data."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise ValueError(
            f"--profile: no profile {name_or_path!r} (bundled: {', '.join(list_profiles())})"
        )
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a profile must be a YAML mapping")  # noqa: TRY004
    known = {f.name for f in dataclasses.fields(Profile)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: {unknown[0]}: unknown profile key")
    data.setdefault("name", path.stem)
    for f in dataclasses.fields(Profile):
        if f.name in data and isinstance(f.default, (int, float)):
            try:  # YAML 1.1 reads "4.0e9" as a string; numbers are numbers here
                data[f.name] = type(f.default)(float(data[f.name]))
            except (TypeError, ValueError):
                raise ValueError(f"{path}: {f.name}: expected a number") from None
    return Profile(**data)
