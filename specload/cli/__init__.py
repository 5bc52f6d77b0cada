"""Command-line entry points, one module per command (``specload <command>``)."""
