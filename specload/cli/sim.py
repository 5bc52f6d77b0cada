"""``specload sim``: run the embedded vLLM-compatible simulator (flags as vLLM's)."""

from __future__ import annotations

import argparse
from typing import Any

from specload.core.errors import ConfigError

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    from specload.sim.flags import add_arguments

    p = subparsers.add_parser(
        "sim",
        help="run the embedded vLLM-compatible simulator",
        description="An OpenAI-compatible server that behaves like vLLM under load, with and "
        "without speculative decoding and prefix caching. See docs/simulator.md.",
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from specload.sim.main import serve, settings_from_args

    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    serve(settings, args.host, args.port)
    return 0
