"""Per-step statistics and their intervals: percentiles with bootstrap CIs, steps pooled over
repeats, blocks or starts, condition/baseline ratios, and the one rule that reads a CI as
helps, hurts, the same or undecided (docs/intervals.md)."""
