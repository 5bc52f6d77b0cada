"""Locust's histogram keys keep sub-millisecond resolution where TPOT lives, bounded above."""

from __future__ import annotations

from specload.locust.events import bucket_response_time


def test_buckets_keep_hundredths_below_10_ms_and_tenths_below_100_ms() -> None:
    assert bucket_response_time(7.4321) == 7.43
    assert bucket_response_time(7.9) == 7.9
    assert bucket_response_time(42.345) == 42.3
    assert bucket_response_time(147) == 150 and bucket_response_time(3432) == 3400
    assert bucket_response_time(58760) == 59000


def test_bucket_key_set_stays_small() -> None:
    keys = {bucket_response_time(x / 1000) for x in range(0, 120_000_000, 997)}
    assert len(keys) < 2500
