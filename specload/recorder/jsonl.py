"""JSON Lines files: a buffered, lossless writer and a tolerant reader.

The writer keeps lines in memory and writes them in one syscall per flush, because a run
produces hundreds of records a second and one write per record would cost more than the
measurement; the run directory flushes at least at every step end and fsyncs at the end, so
a crash loses at most the current step's tail. The reader is tolerant because a run that was
killed (SIGKILL, power loss) may end in half a line: that line is skipped and *reported*,
never silently dropped and never fatal.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

__all__ = ["JsonlWriter", "iter_jsonl"]


class JsonlWriter:
    """Append JSON objects to ``path``, one per line, buffered in memory.

    ``buffer_lines`` bounds how many lines wait in memory before a write; ``flush()`` writes
    and pushes to the OS, ``close()`` also fsyncs so the data survives a host crash.
    """

    def __init__(self, path: str | Path, *, buffer_lines: int = 512) -> None:
        self.path = Path(path)
        self._fh = open(self.path, "ab")  # noqa: SIM115 -- lives as long as the writer
        self._buf: list[bytes] = []
        self._buffer_lines = buffer_lines

    def write(self, obj: dict[str, Any]) -> None:
        """Queue one object; writes through when the buffer is full."""
        self._buf.append(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        if len(self._buf) >= self._buffer_lines:
            self.flush()

    def flush(self) -> None:
        """Write every queued line and hand it to the OS (no fsync: that is ``close``'s job)."""
        if self._buf and not self._fh.closed:
            self._fh.write(b"".join(self._buf))
            self._buf.clear()
        if not self._fh.closed:
            self._fh.flush()

    def close(self, *, fsync: bool = True) -> None:
        """Flush, fsync (unless told not to) and close. Closing twice is harmless."""
        if self._fh.closed:
            return
        self.flush()
        if fsync:
            os.fsync(self._fh.fileno())
        self._fh.close()

    @property
    def closed(self) -> bool:
        return self._fh.closed


def iter_jsonl(path: str | Path, warnings: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Yield each JSON object in ``path``; bad lines are skipped and described in ``warnings``.

    A final line without its newline that does not parse is the signature of a writer that
    was killed mid-write: it is reported as a partial trailing line. Any other undecodable
    line is reported with its line number. A missing file yields nothing and one warning.
    """
    warn = warnings if warnings is not None else []
    p = Path(path)
    if not p.exists():
        warn.append(f"{p}: missing")
        return
    with open(p, "rb") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                if not line.endswith(b"\n"):
                    warn.append(f"{p}: partial trailing line {n} skipped ({len(line)} bytes)")
                else:
                    warn.append(f"{p}: line {n} is not JSON, skipped")
                continue
            if not isinstance(obj, dict):
                warn.append(f"{p}: line {n} is not a JSON object, skipped")
                continue
            yield obj
