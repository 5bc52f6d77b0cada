"""Start the simulator: flags (vLLM's names, ``flags.py``) → ``SimSettings`` → aiohttp.

``settings_from_args`` raises ``ValueError`` with one line naming the flag, which the CLI turns
into exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import signal

from aiohttp import web

from specload.sim.faults import Faults
from specload.sim.flags import DEFAULT_MODEL, add_arguments
from specload.sim.host import JitterParams, draw_host, parse_jitter
from specload.sim.profiles import Profile, load_profile
from specload.sim.regime import RegimeParams, parse_regime
from specload.sim.server import SimSettings, build_app
from specload.sim.spec import parse_spec_config

__all__ = ["DEFAULT_MODEL", "add_arguments", "serve", "settings_from_args"]


def settings_from_args(a: argparse.Namespace) -> SimSettings:
    """Validate flags into settings; ``ValueError`` names the flag."""
    profile = _override(load_profile(a.profile), a.profile_set)
    names = tuple(a.served_model_name or [a.model or DEFAULT_MODEL])
    spec = parse_spec_config(a.speculative_config)
    for flag in ("max_num_seqs", "max_model_len", "num_gpu_blocks_override"):
        v = getattr(a, flag)
        if v is not None and v < 1:
            raise ValueError(f"--{flag.replace('_', '-')}: must be >= 1")
    faults = Faults(
        error_rate=a.fault_error_rate,
        error_status=a.fault_error_status,
        rate_limit_rate=a.fault_429_rate,
        stall_after_tokens=a.fault_stall_after,
        stall_s=a.fault_stall_s,
        drop_after_tokens=a.fault_drop_after,
        malformed_after_tokens=a.fault_malformed_after,
        no_done=a.fault_no_done,
        stream_fault_rate=a.fault_stream_rate,
        tokenize_reset_every=a.fault_tokenize_reset_every,
        metrics_delay_s=a.fault_metrics_delay_s,
        metrics_status=a.fault_metrics_status,
    )
    try:
        faults.validate()
    except ValueError as exc:
        raise ValueError(f"fault flags: {exc}") from None
    jitter = parse_jitter(a.start_jitter, JitterParams.from_profile(profile))
    regime = parse_regime(a.spec_regime, RegimeParams.from_profile(profile))
    host = draw_host(
        a.spec_overhead_scale, jitter, a.start_seed, regime, _regime_seed(a.regime_seed)
    )
    return SimSettings(
        host=host,
        profile=profile,
        served_model_names=names,
        spec=spec,
        prefix_caching=a.enable_prefix_caching,
        max_num_seqs=a.max_num_seqs,
        max_model_len=a.max_model_len,
        num_gpu_blocks=a.num_gpu_blocks_override,
        seed=a.seed,
        ground_truth=a.ground_truth,
        ground_truth_max=a.ground_truth_max,
        faults=faults,
    )


def _regime_seed(value: str | None) -> int | None:
    """``--regime-seed``: an integer; None (not given) lets the start seed decide."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"--regime-seed {value}: expected an integer seed") from None


def _override(profile: Profile, items: list[str]) -> Profile:
    """Apply ``--profile-set KEY=VALUE`` overrides (numbers only)."""
    fields = {f.name: f for f in dataclasses.fields(Profile)}
    changes: dict[str, float | int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        f = fields.get(key.strip())
        if not sep or f is None or not isinstance(f.default, (int, float)):
            raise ValueError(
                f"--profile-set {item}: expected KEY=NUMBER with KEY a numeric "
                "profile field (see docs/simulator.md)"
            )
        try:
            changes[f.name] = type(f.default)(float(value))
        except ValueError:
            raise ValueError(f"--profile-set {item}: {value!r} is not a number") from None
    return profile.with_overrides(**changes) if changes else profile


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # type: ignore[import-not-found,unused-ignore]  # optional, faster

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:
        return asyncio.new_event_loop()


def serve(settings: SimSettings, host: str, port: int) -> None:
    """Run the server until SIGINT/SIGTERM."""
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    app = build_app(settings)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        spec = json.dumps(settings.spec.raw) if settings.spec else "off"
        print(
            f"specload sim: http://{host}:{port} profile={settings.profile.name} "
            f"model={settings.served_model_names[0]} speculative={spec} "
            f"prefix_caching={settings.prefix_caching}",
            flush=True,
        )
        if not settings.host.is_identity or settings.host.jitter is not None:
            print(f"specload sim: host {settings.host.describe()}", flush=True)
        # Fewer collections: the step loop allocates many short-lived objects; frozen startup
        # objects are never scanned again.
        gc.collect()
        gc.freeze()
        gc.set_threshold(5_000, 20, 50)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
