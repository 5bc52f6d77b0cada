"""``specload inspect PROMPTS.jsonl | RUN_DIR``: will n-gram drafting or prefix caching help?

Renders ``specload.inspect.profile.RepetitionProfile`` as a terminal summary (rich) or, with
``--json``, as one JSON object for pipelines. Bad input is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_parser", "render", "run"]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="would n-gram drafting or prefix caching help? (prompt set or baseline run)",
        description='Profile a prompt set (JSONL of {"messages": [...]}) or a baseline run dir: '
        "how much of the output n-gram prompt lookup could have proposed, how long the shared "
        "prefixes are and how many requests share them, and a plain recommendation.",
    )
    p.add_argument(
        "source", metavar="PROMPTS.jsonl|RUN_DIR", help="prompt set file or run directory"
    )
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=None,
        help="local tokenizer.json (or its folder); default: word-level approximation",
    )
    p.set_defaults(func=run)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render(profile: Any, console: Any) -> None:
    """Print ``profile`` (a ``RepetitionProfile``) on a rich ``console``."""
    from rich.markup import escape
    from rich.table import Table

    console.print(
        f"[bold]specload inspect[/bold] {escape(profile.source)} "
        f"({profile.kind}, {profile.requests} requests)"
    )
    table = Table(title="Lookup match rate (share of output tokens n-gram lookup could propose)")
    for col in ("basis", "tokens", "n", "mean", "p10", "p50", "p90"):
        table.add_column(col)
    d = profile.lookup
    if d is None:
        table.add_row(
            escape(profile.lookup_basis), profile.lookup_method or "-", "0", "-", "-", "-", "-"
        )
    else:
        table.add_row(
            escape(profile.lookup_basis),
            profile.lookup_method or "-",
            str(d.n),
            _pct(d.mean),
            _pct(d.p10),
            _pct(d.p50),
            _pct(d.p90),
        )
    console.print(table)
    _render_categories(profile.categories, console)
    _render_prefix(profile.prefix, console)
    for note in profile.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print("[bold]Recommendation[/bold]")
    for rec in profile.recommendations:
        console.print(f"  [bold]{escape('[' + rec.action + ']')}[/bold] {escape(rec.text)}")


def _render_categories(categories: list[Any], console: Any) -> None:
    """Per category: its lookup match rate, reusable prefix share and recommendation."""
    if not categories:
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Per category (each with its own recommendation)")
    for col in ("category", "requests", "lookup p50", "lookup mean", "prefix reusable", "advice"):
        table.add_column(col)
    for c in categories:
        d = c.lookup
        table.add_row(
            escape(c.name),
            str(c.requests),
            _pct(d.p50 if d else None),
            _pct(d.mean if d else None),
            _pct(c.cacheable_share),
            escape(c.recommendation.action),
        )
    console.print(table)


def _render_prefix(prefix: Any, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    if prefix is None:
        console.print("Shared prefixes: not available")
        return
    table = Table(title=f"Shared prefixes ({escape(prefix.basis)})")
    table.add_column("figure")
    table.add_column("value")
    table.add_row("prompt tokens", str(prefix.prompt_tokens))
    table.add_row("reusable by prefix caching", _pct(prefix.cacheable_share))
    if prefix.shared_prefix is not None:
        s = prefix.shared_prefix
        table.add_row(
            "longest shared prefix p50 / p90 / max",
            f"{s.p50:.0f} / {s.p90:.0f} / {s.max:.0f} tokens",
        )
    table.add_row("requests sharing >= 16 tokens", str(prefix.requests_sharing))
    table.add_row("exact repeats", str(prefix.exact_repeats))
    for g in prefix.groups:
        table.add_row("group", f"{g.requests} requests share {g.tokens} tokens")
    console.print(table)


def run(args: argparse.Namespace) -> int:
    from specload.client.lookup import load_tokenizer
    from specload.inspect.profile import inspect_path

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    profile = inspect_path(args.source, tokenizer)
    if args.json:
        print(json.dumps(profile.to_dict(), indent=2))
        return 0
    from rich.console import Console

    render(profile, Console(file=sys.stdout, width=120))
    return 0
