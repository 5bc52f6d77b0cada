"""``specload`` entry point: dispatch to one module per command, map errors to exit codes.

Each command module in this package exposes ``add_parser(subparsers)`` (which registers its
sub-parser and sets ``func``) and keeps heavy imports (locust, numpy, matplotlib) inside the
function that runs it, so ``specload --help`` stays fast. Bad input raises ``ConfigError``
and becomes one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from specload import __version__
from specload.core.errors import SpecloadError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("demo", "run", "sweep", "compare", "inspect", "sim", "locust")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specload",
        description=(
            "Does speculative decoding (and prefix caching) make this LLM server faster "
            "for our traffic, and up to what load? Steps open-loop QPS through Locust, "
            "records every request, and finds the crossover."
        ),
    )
    parser.add_argument("--version", action="version", version=f"specload {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"specload.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"specload.cli.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["locust"]:  # Locust parses its own command line (``cli.locust``)
        from specload.cli.locust import run

        return run(args_in[1:])
    parser = build_parser()
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SpecloadError as exc:
        print(f"specload {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"specload {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
