"""A text/event-stream parser: a line-fed decoder, and a reader over a
binary stream for the sync client (the asyncio client feeds the decoder)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, List, Optional

# Hutch's events carry at most 64 KiB of output, escaped; anything past this
# is not an event of this API.
MAX_LINE = 64 << 20


@dataclass
class SSEEvent:
    event: str
    data: str
    id: Optional[str]


class SSEDecoder:
    """Turns lines into events. Comments (``: ping``) and ``retry`` fields are
    skipped; an event without data is not dispatched."""

    def __init__(self) -> None:
        self._event = ""
        self._data: List[str] = []
        self._id: Optional[str] = None

    def line(self, raw: bytes) -> Optional[SSEEvent]:
        """Takes one line (with or without its line end); the event it completes."""
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if line.endswith("\r"):
            line = line[:-1]
        if line == "":
            ev = self.finish()
            self._event, self._id = "", None
            return ev
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            self._id = value
        return None

    def finish(self) -> Optional[SSEEvent]:
        """The pending event at the end of the stream (an unterminated last one)."""
        if not self._data:
            return None
        ev = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
        self._data = []
        return ev


class SSEReader:
    """Reads events from ``fp`` (``readline`` is all it needs)."""

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp
        self._dec = SSEDecoder()

    def next(self) -> Optional[SSEEvent]:
        """The next event, or ``None`` at the end of the stream."""
        while True:
            raw = self._fp.readline(MAX_LINE)
            if not raw:
                return self._dec.finish()
            ev = self._dec.line(raw)
            if ev is not None:
                return ev
