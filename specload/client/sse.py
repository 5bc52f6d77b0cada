"""A pure, incremental Server-Sent Events decoder: bytes in, events out, no sockets.

``SSEDecoder.feed(data)`` accepts bytes split anywhere (mid-line, mid-CRLF, mid-UTF-8
character) and returns the events completed by them; ``flush()`` ends the stream and returns
an event left without its terminating blank line (lenient: some servers close right after
the last ``data:`` line). Follows the WHATWG EventSource parsing rules that matter for
OpenAI-style streams: LF, CRLF and lone CR line ends; ``:`` comment lines ignored; one
optional space after the field colon stripped; several ``data:`` lines joined with ``\\n``;
an event without data is not dispatched. ``data: [DONE]`` is an ordinary event whose
``is_done`` is true.

``feed_line(line)`` is for callers that already read whole lines (the streaming client
reads with ``readline``); it returns the event a blank line completes. ``feed_line_data``
is the same returning only the raw data bytes (no ``Event``, no decoding: orjson parses
bytes), the client's hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DONE", "Event", "SSEDecoder"]

#: The data of OpenAI's end-of-stream sentinel event.
DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched SSE event. ``data`` is the joined ``data:`` lines, decoded UTF-8."""

    data: str
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None

    @property
    def is_done(self) -> bool:
        """True for the ``data: [DONE]`` sentinel that ends an OpenAI stream."""
        return self.data == DONE


class SSEDecoder:
    """Incremental decoder state for one stream. Not thread-safe; one per response."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_pending_cr", "_retry")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pending_cr = False  # last chunk ended in CR: a following LF belongs to it
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes) -> list[Event]:
        """Consume ``data`` (any split) and return the events it completes, in order."""
        if not data:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        buf = self._buf
        buf += data
        events: list[Event] = []
        start = 0
        n = len(buf)
        while start < n:
            lf = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, lf if lf >= 0 else n)
            if cr >= 0:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._pending_cr = True
            elif lf >= 0:
                end, nxt = lf, lf + 1
            else:
                break
            ev = self._line(bytes(buf[start:end]))
            if ev is not None:
                events.append(ev)
            start = nxt
        del buf[:start]
        return events

    def feed_line(self, line: bytes) -> Event | None:
        """Consume one whole line (its LF/CRLF ending optional); return a completed event."""
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        elif line.endswith(b"\r"):
            line = line[:-1]
        return self._line(line)

    def feed_line_data(self, line: bytes) -> bytes | None:
        """Fast path of ``feed_line`` for a client that only needs the data: the raw,
        undecoded data bytes of the event a blank line completes (event name, id and retry
        are tracked but not returned)."""
        if line == b"\n" or line == b"\r\n" or line == b"\r":
            data = self._data
            self._event = None
            if not data:
                return None
            self._data = []
            return data[0] if len(data) == 1 else b"\n".join(data)
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        elif line.endswith(b"\r"):
            line = line[:-1]
        self._line(line)
        return None

    def flush(self) -> list[Event]:
        """End of stream: the unterminated last line and an undispatched event, if any."""
        events: list[Event] = []
        if self._buf:
            ev = self._line(bytes(self._buf))
            self._buf.clear()
            if ev is not None:
                events.append(ev)
        self._pending_cr = False
        ev = self._dispatch()
        if ev is not None:
            events.append(ev)
        return events

    def _line(self, line: bytes) -> Event | None:
        if line[:6] == b"data: ":  # the common case first
            self._data.append(line[6:])
            return None
        if not line:
            return self._dispatch()
        if line[:1] == b":":
            return None
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        self._field(name, value)
        return None

    def _field(self, name: bytes, value: bytes) -> None:
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._event = None
            return None
        raw = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        ev = Event(
            data=raw.decode("utf-8", "replace"),
            event=self._event or "message",
            id=self._id,
            retry_ms=self._retry,
        )
        self._data = []
        self._event = None
        return ev
