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

__all__ = ["COMMANDS", "build_parser", "main", "unknown_option"]

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


def unknown_option(parser: argparse.ArgumentParser, args: Sequence[str]) -> str | None:
    """One line naming the first option the command does not have, with the closest one it
    has ("specload run: error: unknown option --scenaro (did you mean --scenario?)"); None
    when every option is known.

    Checked before argparse parses: it reports a misspelt option as a missing required one
    (with seven lines of usage), or, after a command, with the top-level usage.
    """
    import difflib

    commands = next(
        (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {}
    )
    name = next((a for a in args if a in commands), None)
    if name is None:
        return None
    sub = commands[name]
    known = set(sub._option_string_actions) | set(parser._option_string_actions)
    for arg in args[args.index(name) + 1 :]:
        if arg == "--":
            return None
        option = arg.split("=", 1)[0]
        if not option.startswith("--") or option in known:
            continue
        if any(k.startswith(option) for k in known):  # argparse takes unique prefixes
            continue
        close = difflib.get_close_matches(option, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else f" (see specload {name} --help)"
        return f"specload {name}: error: unknown option {option}{hint}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["locust"]:  # Locust parses its own command line (``cli.locust``)
        from specload.cli.locust import run

        return run(args_in[1:])
    parser = build_parser()
    unknown = unknown_option(parser, args_in)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return 2
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
