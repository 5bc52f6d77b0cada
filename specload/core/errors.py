"""Errors users see. Each maps to an exit code, so the CLI never shows a traceback for bad input.

``ConfigError`` (exit 2) names where the bad input is: a file, a key path and what was
expected. ``TargetError`` (exit 1) is a server that could not be started or reached.
"""

from __future__ import annotations

__all__ = ["ConfigError", "SpecloadError", "TargetError", "shown_path"]


def shown_path(file: str) -> str:
    """A file named in an error, one style everywhere: relative to the current directory when
    it lies inside it (as a user types it), else as given: a scenario's prompt file, resolved
    against the scenario's folder, shows in the same style as the scenario."""
    import os

    if not os.path.isabs(file):
        return file
    cwd = os.getcwd()
    try:
        inside = os.path.commonpath([cwd, file]) == cwd
    except ValueError:  # another drive, or a mix of absolute and relative
        return file
    return os.path.relpath(file, cwd) if inside else file


class SpecloadError(Exception):
    """Base of every error specload reports to the user as one line."""

    exit_code = 1


class ConfigError(SpecloadError):
    """Bad user input: scenario, CLI argument, path. Exit code 2.

    The message is one line: ``FILE: key.path: problem (expected ...)``.
    """

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, path: str | None = None) -> None:
        file = shown_path(file) if file else file
        self.file = file
        self.path = path
        parts = [p for p in (file, path) if p]
        super().__init__(": ".join([*parts, message]) if parts else message)


class TargetError(SpecloadError):
    """The server under test could not be started, became unhealthy, or refused us. Exit 1."""

    exit_code = 1
