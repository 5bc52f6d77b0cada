"""Retries with backoff for the requests specload makes before any load (``/tokenize``).

A production server under load resets or times out a request now and then; preparing a run
sends hundreds of ``/tokenize`` requests, so one such hiccup must not fail the run. A failure
is retried when it is transient: the connection was reset or dropped, the request timed out,
the server answered 5xx, or 429 (after its ``Retry-After``, when it gives one). A refused
connection, another 4xx or a malformed answer is not: the server is not there, or will never
answer that request, and retrying would only delay the error. Delays double from ``base_s``
(capped), so a bounded number of attempts bounds the time spent.
"""

from __future__ import annotations

import email.utils
import http.client
import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

__all__ = ["transient_delay", "with_retries"]

T = TypeVar("T")

_TRANSIENT_ERRORS = (
    ConnectionResetError,  # also http.client.RemoteDisconnected
    ConnectionAbortedError,
    BrokenPipeError,
    TimeoutError,  # socket.timeout is TimeoutError (Python 3.10+)
    http.client.IncompleteRead,
)


def _retry_after(value: str | None) -> float:
    """``Retry-After`` as seconds (a number or an HTTP date); 0 when absent or unreadable."""
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())


def transient_delay(exc: BaseException) -> float | None:
    """How long the server asked us to wait (0: no preference) when ``exc`` is transient;
    None when it is not worth another try."""
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code == 429:
            return _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        return 0.0 if exc.code >= 500 else None
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return transient_delay(reason) if isinstance(reason, BaseException) else None
    if isinstance(exc, _TRANSIENT_ERRORS):
        return 0.0
    return None


def with_retries(
    fn: Callable[[], T],
    *,
    attempts: int = 5,
    base_s: float = 0.1,
    cap_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, tried up to ``attempts`` times while it fails transiently; the last error
    (or the first permanent one) is raised as it is."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            wanted = transient_delay(exc)
            if wanted is None or attempt == attempts - 1:
                raise
            sleep(min(cap_s, max(wanted, base_s * 2**attempt)))
    raise AssertionError("unreachable")  # pragma: no cover
