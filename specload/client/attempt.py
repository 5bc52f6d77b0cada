"""One request attempt, one record: the part both clients share.

``StreamClient`` (geventhttpclient, the default) and ``OpenAIStreamClient`` (the official
SDK) differ in how they talk to the server, not in what a request's record must say. Here,
once for both: the whole-request deadline (a ``gevent.Timeout``: the SDK's and the pool's
timeouts are per read), a killed greenlet (Locust stopping its users) turned into
``RequestCancelled`` carrying the request's ``cancelled`` record, and any other exception
turned into an ``ErrorInfo`` by the client's own classifier, so that a request never crashes
the run and always leaves exactly one record.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import gevent
from gevent import GreenletExit

from specload.client.assemble import RecordBuilder
from specload.client.request import ChatRequest, RecordMeta
from specload.client.timing import CLOCK, WallAnchor
from specload.core.records import ErrorInfo, RequestRecord

__all__ = [
    "DEFAULTS",
    "AttemptClient",
    "ClientSettings",
    "Deadline",
    "Exchange",
    "RequestCancelled",
    "attempt",
]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """What every client takes besides the server's URL, with one set of defaults: the two
    clients spelled these out in their own signatures before, where they could drift.

    ``concurrency`` sizes the connection pool; it must be at least the requests in flight
    at once, or a request waits for a connection after ``sent_at`` and the wait shows up as
    TTFT. The key goes only into the ``Authorization`` header (never a record, a log line
    or this object's repr)."""

    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    store_text: bool = False
    concurrency: int = 64
    extra_headers: Mapping[str, str] | None = None
    record_itl: bool = True


#: The settings a client gets when none are given (frozen, so one object serves all).
DEFAULTS = ClientSettings()


def api_root(base_url: str) -> str:
    """The OpenAI API's root under ``base_url``: ``http://host:port/v1`` whether or not the
    user wrote the ``/v1`` (both are common in server docs)."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


class RequestCancelled(GreenletExit):  # type: ignore[misc,unused-ignore]
    """The sending greenlet was killed; ``record`` is the request's ``cancelled`` record."""

    def __init__(self, record: RequestRecord) -> None:
        super().__init__("request cancelled")
        self.record = record


#: What a client does with one request: the exchange itself, and what to settle at the end.
Exchange = tuple[Callable[[RecordBuilder], None], Callable[[RecordBuilder], None] | None]


class Deadline(Exception):
    """Raised by the attempt's own ``gevent.Timeout`` when a request exceeds ``timeout_s``."""


def attempt(
    req: ChatRequest,
    meta: RecordMeta,
    *,
    timeout_s: float,
    store_text: bool,
    record_itl: bool,
    exchange: Callable[[RecordBuilder], None],
    classify: Callable[[Exception, RecordBuilder], ErrorInfo],
    settle: Callable[[RecordBuilder], None] | None = None,
) -> RequestRecord:
    """Run ``exchange`` against a fresh ``RecordBuilder`` and return the request's one record.

    ``classify`` names any exception the exchange raised; ``settle`` runs last, whatever
    happened (the SDK client sets the send time its transport saw there). Every time the
    builder sees is ``CLOCK`` (monotonic); the record's unix timestamps come from one
    ``WallAnchor`` read here, so a wall-clock step mid-request changes no duration.
    """
    anchor = WallAnchor.take()  # durations on the monotonic clock, timestamps through this
    b = RecordBuilder(
        req, meta, anchor.mono, anchor=anchor, store_text=store_text, record_itl=record_itl
    )
    error: ErrorInfo | None = None
    timer = gevent.Timeout(timeout_s, Deadline)
    timer.start()
    try:
        exchange(b)
    except Deadline:
        error = ErrorInfo("timeout", f"no complete response within {timeout_s:g} s")
    except GreenletExit:
        if settle is not None:
            settle(b)
        raise RequestCancelled(
            b.build(ErrorInfo("cancelled", "greenlet killed"), CLOCK.now())
        ) from None
    except Exception as exc:  # noqa: BLE001 - a request must never crash the run
        error = classify(exc, b)
    finally:
        timer.close()
        if settle is not None:
            settle(b)
    return b.build(error, b.done_at if b.done_at is not None else CLOCK.now())


class AttemptClient(ABC):
    """What both clients share: their settings and ``send``. A client supplies how one
    request is exchanged (``_exchange_for``) and how its failures are named (``_classify``)."""

    def __init__(self, base_url: str, settings: ClientSettings) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(settings.timeout_s)
        self.store_text = settings.store_text
        self.record_itl = settings.record_itl

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}({self.base_url!r}, timeout_s={self.timeout_s:g})"

    def send(
        self,
        req: ChatRequest,
        *,
        request_id: str,
        worker: str,
        step: int,
        repeat: int,
        target_qps: float,
        warmup: bool,
        scheduled_at: float,
    ) -> RequestRecord:
        """Send ``req`` and return its one record (failures included)."""
        meta = RecordMeta(
            request_id=request_id,
            worker=worker,
            step=step,
            repeat=repeat,
            target_qps=target_qps,
            warmup=warmup,
            scheduled_at=scheduled_at,
        )
        exchange, settle = self._exchange_for(req, request_id)
        return attempt(
            req,
            meta,
            timeout_s=self.timeout_s,
            store_text=self.store_text,
            record_itl=self.record_itl,
            exchange=exchange,
            classify=self._classify,
            settle=settle,
        )

    @abstractmethod
    def _exchange_for(self, req: ChatRequest, request_id: str) -> Exchange:
        """The exchange of one request, and what to settle after it (or None)."""

    @abstractmethod
    def _classify(self, exc: Exception, b: RecordBuilder) -> ErrorInfo:
        """The error kind of an exception the exchange raised."""
