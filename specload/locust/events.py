"""The bridge from specload records to Locust's statistics (its live rows), and the
sub-millisecond response-time buckets those rows need.

Locust's rows are a live view only: every figure specload reports comes from its own
full-precision records. Each request shows in up to three rows under the step's name
(``chat @ 4 qps``): ``TTFT``, ``TPOT`` and ``E2E`` (milliseconds, as Locust expects).

Only ``E2E`` is a Locust ``request`` event. Locust adds every ``request`` event to its
Aggregated row, and that row drives the header's RPS and failure ratio, the Charts tab, the
``--csv`` stats and history and the ``--html`` report; firing three events per request
tripled them all and mixed TTFT, TPOT and E2E in one response-time chart (Locust has no switch
for this, locustio/locust#2955). So ``TTFT`` and ``TPOT`` go straight into their own
``StatsEntry``, leaving ``stats.total`` alone. Workers send every entry to the master in their
reports (``serialize_stats``) and the master merges them entry by entry, so the rows are the
same in local, ``--processes`` and master/worker runs. A failed request is one ``E2E``
failure carrying the error kind as its exception, so Locust counts failed requests, not
failed metrics.
"""

from __future__ import annotations

from typing import Any

from specload.core.records import RequestRecord

__all__ = [
    "RequestFailed",
    "bucket_response_time",
    "fire_request_events",
    "install_buckets",
    "log_side_row",
]


class RequestFailed(Exception):
    """The exception Locust shows for a failed request: ``kind: detail``."""


def bucket_response_time(response_time: float) -> int | float:
    """Locust's histogram key for a response time in ms, kept below one millisecond.

    Locust rounds to whole milliseconds under 100 ms, which would hide a TPOT of 7.4 vs
    7.9 ms entirely. Here: 0.01 ms steps under 10 ms, 0.1 ms under 100 ms, then Locust's own
    two significant digits. Still a bounded key set (~2,300 keys), so the stats that workers
    send to the master stay small.
    """
    if response_time < 10:
        return round(response_time, 2)
    if response_time < 100:
        return round(response_time, 1)
    if response_time < 1000:
        return int(round(response_time, -1))
    if response_time < 10000:
        return int(round(response_time, -2))
    return int(round(response_time, -3))


def install_buckets() -> None:
    """Replace ``locust.stats.bucket_response_time`` in this process (idempotent).

    Called from the locustfile, so it runs in every process: master, local and each worker
    (``--processes`` forks and ``--worker`` processes import the locustfile themselves).
    """
    import locust.stats

    locust.stats.bucket_response_time = bucket_response_time  # type: ignore[assignment]


def log_side_row(stats: Any, method: str, name: str, response_time_ms: float, length: int) -> None:
    """Log one value into the ``(name, method)`` row without counting it as a request.

    ``RequestStats.log_request`` would also add it to ``stats.total`` (the Aggregated row);
    the entry alone keeps the row while the totals count each request once (module doc).
    """
    stats.get(name, method).log(response_time_ms, length)


def fire_request_events(environment: Any, name: str, rec: RequestRecord) -> None:
    """Show one record in Locust's rows: TTFT/TPOT side rows, one ``E2E`` request event."""
    fire = environment.events.request.fire
    if rec.ok:
        if rec.ttft_s is not None:
            log_side_row(
                environment.stats, "TTFT", name, rec.ttft_s * 1000.0, rec.prompt_tokens or 0
            )
        if rec.tpot_s is not None:
            log_side_row(
                environment.stats, "TPOT", name, rec.tpot_s * 1000.0, rec.output_tokens or 0
            )
        fire(
            request_type="E2E",
            name=name,
            response_time=(rec.e2e_s or 0.0) * 1000.0,
            response_length=rec.output_tokens or 0,
            exception=None,
            context={},
        )
        return
    elapsed = rec.e2e_s
    if elapsed is None and rec.done_at is not None:
        elapsed = rec.done_at - rec.sent_at
    err = rec.error
    exc = RequestFailed(f"{err.kind}: {err.detail}" if err else "failed")
    fire(
        request_type="E2E",
        name=name,
        response_time=(elapsed or 0.0) * 1000.0,
        response_length=0,
        exception=exc,
        context={},
    )
