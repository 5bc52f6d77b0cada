"""Live per-step figures: percentiles from records as they arrive, in any order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specload.locust.live import LiveStats


def test_snapshot_percentiles_match_numpy_for_records_in_any_order() -> None:
    rng = random.Random(7)
    tpots = [rng.lognormvariate(-4.5, 0.4) for _ in range(501)]
    live = LiveStats()
    live.begin_step(0, 0, 8.0, 100.0, 101.0, 121.0)
    for i, tpot in enumerate(tpots):
        live.add(
            {
                "step": 0,
                "ok": True,
                "warmup": False,
                "tpot_s": tpot,
                "ttft_s": 0.05 + i * 1e-4,
                "e2e_s": 1.0,
                "content_chunks": 4,
                "output_tokens": 4 + i % 3,
            }
        )
        if i in (10, 250):  # a snapshot in between must not disturb what follows
            live.steps[0].summary()
    tally = live.steps[0]
    assert tally.tpot_s == sorted(tpots)
    summary = tally.summary()
    assert summary["tpot_s"]["p50"] == pytest.approx(np.percentile(tpots, 50))
    assert summary["tpot_s"]["p95"] == pytest.approx(np.percentile(tpots, 95))
    assert summary["tpot_s"]["n"] == 501
    assert summary["tokens_per_chunk"] == pytest.approx(1.25)
