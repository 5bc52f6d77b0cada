"""The command lines specload starts itself with: ``specload run`` and ``specload compare``.

A sweep runs one ``specload run`` per condition and start (or one per interleaved session),
then ``specload compare``; the web UI compares a finished run on request. One builder each,
so that a flag every child needs (a run's ``--skip-preflight``, its ``--processes``) is
passed the same way everywhere, and a new one is added once.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["compare_argv", "run_argv", "specload_argv"]


def specload_argv(command: str, *args: str) -> list[str]:
    """``python -m specload COMMAND ARGS`` with this interpreter (the child sees the same
    specload as its parent, installed or not)."""
    return [sys.executable, "-m", "specload", command, *args]


def run_argv(
    *,
    host: str,
    scenario: Path,
    label: str,
    out: Path,
    processes: int | None = None,
    store_text: bool = False,
    flags: Sequence[str] = (),
) -> list[str]:
    """``specload run`` for a server the caller has checked already (``--skip-preflight``);
    ``flags``: anything else, after the common ones."""
    argv = specload_argv(
        "run", "--host", host, "--scenario", str(scenario), "--label", label, "--out", str(out),
        "--skip-preflight",
    )  # fmt: skip
    if processes:
        argv += ["--processes", str(processes)]
    if store_text:
        argv.append("--store-text")
    return [*argv, *flags]


def compare_argv(
    run_dirs: Sequence[Path], out: Path, *, baseline: str | None = None, flags: Sequence[str] = ()
) -> list[str]:
    """``specload compare`` of ``run_dirs`` into ``out``, the baseline named when given."""
    argv = specload_argv("compare", *map(str, run_dirs), "--out", str(out))
    if baseline:
        argv += ["--baseline", baseline]
    return [*argv, *flags]
