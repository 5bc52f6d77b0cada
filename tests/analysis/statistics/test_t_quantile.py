"""Student's t quantiles: one definition (``stats.t_quantile``), exact where tables stop."""

from __future__ import annotations

import pytest

from specload.analysis.statistics.stats import t975, t9875, t_quantile


@pytest.mark.parametrize(
    ("p", "df", "want"),  # Student's t tables
    [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 5, 2.571), (0.975, 30, 2.042),
     (0.975, 120, 1.980), (0.9875, 3, 4.177), (0.9875, 10, 2.634), (0.995, 7, 3.499)],
)  # fmt: skip
def test_t_quantile_matches_the_tables(p: float, df: int, want: float) -> None:
    assert t_quantile(p, df) == pytest.approx(want, abs=1e-3)


def test_the_named_quantiles_are_t_quantile() -> None:
    assert t975(5) == t_quantile(0.975, 5) and t9875(12) == t_quantile(0.9875, 12)
