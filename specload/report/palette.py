"""The colours of the one rule and of the lines, defined once for every place that shows them.

The HTML report, the web UI, the terminal tables and the plots colour a step that helps, one
that hurts and the baseline alike, so the colours are written here only: copies drift apart.
The style sheets read them as CSS variables (``css_variables``: inlined into the report and
the web UI's page), Python reads the constants.
"""

from __future__ import annotations

__all__ = [
    "BASELINE",
    "CSS",
    "HELPS",
    "HURTS",
    "LINES",
    "NEUTRAL",
    "SAME",
    "TERMINAL",
    "css_variables",
]

#: A step that helps / hurts / is shown the same: lines, borders, marks. An undecided step
#: has no colour of its own (italic where text allows): nothing is known about it yet.
HELPS, HURTS, SAME = "#2ca02c", "#d62728", "#3b6ea8"
#: Reference lines (ratio 1, the offered load) and the baseline's own line.
NEUTRAL, BASELINE = "#888888", "#444444"
#: Line colours in order: the baseline's grey first, then the conditions (or classes).
LINES = (BASELINE, "#1f77b4", HURTS, HELPS, "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
#: Terminal cell styles by effect (rich).
TERMINAL = {
    "helps": HELPS,
    "hurts": HURTS,
    "same": SAME,
    "undecided": "italic",
    "incomplete": "dim",
}

#: Every colour the style sheets get, by variable name (``--sl-NAME``).
CSS = {
    "helps": HELPS,
    "hurts": HURTS,
    "same": SAME,
    "neutral": NEUTRAL,
    "baseline": BASELINE,
    # tints for cell backgrounds, darker shades for text on white (readable contrast)
    "helps-bg": "#e3f4e3",
    "hurts-bg": "#fbe3e3",
    "same-bg": "#e4ecf6",
    "helps-text": "#157347",
    "hurts-text": "#b02a37",
    "same-text": "#2c5282",
    # findings and provisional states: amber, a line's colour, a background and its text
    "warn": "#e0a000",
    "warn-bg": "#fff3cd",
    "warn-text": "#6b4e00",
}


def css_variables() -> str:
    """``:root`` with ``--sl-helps``, ``--sl-hurts``, ... for the style sheets."""
    body = " ".join(f"--sl-{k}: {v};" for k, v in CSS.items())
    return f":root {{ {body} }}\n"
