"""The error for a scenario key nobody reads, one wording for every part of the scenario.

For a typo (``step_duraton_s``) the closest key a person may write comes first, and the list
holds only those keys, not the internal ones: a person needs the one they meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["unknown_key"]


def unknown_key(key: str, known: Iterable[str]) -> str:
    """``unknown key (did you mean 'x'? expected one of: ...)``; the hint only when a key
    is close (``difflib``, ratio 0.6)."""
    names = sorted(known)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key ({hint}expected one of: {', '.join(names)})"
