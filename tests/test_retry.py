"""Retries before any load: transient failures are tried again, others fail at once."""

from __future__ import annotations

import email.message
import urllib.error

import pytest

from specload.core.retry import transient_delay, with_retries


def _http(code: int, retry_after: str | None = None) -> urllib.error.HTTPError:
    headers = email.message.Message()
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return urllib.error.HTTPError("http://x/tokenize", code, "x", headers, None)


@pytest.mark.parametrize(
    ("exc", "delay"),
    [
        (ConnectionResetError(), 0.0),
        (TimeoutError(), 0.0),
        (urllib.error.URLError(ConnectionResetError()), 0.0),
        (_http(503), 0.0),
        (_http(429, "2"), 2.0),
        (_http(429), 0.0),
        (urllib.error.URLError(ConnectionRefusedError()), None),  # nobody there
        (_http(404), None),
        (_http(400), None),
        (ValueError("not JSON"), None),
    ],
)
def test_which_failures_are_worth_another_try(exc: Exception, delay: float | None) -> None:
    assert transient_delay(exc) == delay


def test_transient_failures_are_retried_with_growing_delays() -> None:
    slept: list[float] = []
    failures = [ConnectionResetError(), _http(429, "1.5"), _http(502)]

    def fn() -> int:
        if failures:
            raise failures.pop(0)
        return 7

    assert with_retries(fn, sleep=slept.append) == 7
    assert slept == [0.1, 1.5, 0.4]  # the server's Retry-After when it is the longer wait


def test_a_permanent_failure_is_raised_at_once_and_an_endless_one_after_the_last_try() -> None:
    slept: list[float] = []
    with pytest.raises(urllib.error.HTTPError):
        with_retries(lambda: (_ for _ in ()).throw(_http(404)), sleep=slept.append)
    assert slept == []
    with pytest.raises(ConnectionResetError):
        with_retries(lambda: (_ for _ in ()).throw(ConnectionResetError()), sleep=slept.append)
    assert slept == [0.1, 0.2, 0.4, 0.8]  # five attempts, four waits
