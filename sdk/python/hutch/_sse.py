"""A text/event-stream parser over a binary stream, one event at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Optional

# Hutch's events carry at most 64 KiB of output, escaped; anything past this
# is not an event of this API.
_MAX_LINE = 64 << 20


@dataclass
class SSEEvent:
    event: str
    data: str
    id: Optional[str]


class SSEReader:
    """Reads events from ``fp`` (``readline`` is all it needs).

    Comments (``: ping``) and ``retry`` fields are skipped; an event without
    data is not dispatched; an unterminated last event is still delivered.
    """

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp

    def next(self) -> Optional[SSEEvent]:
        """The next event, or ``None`` at the end of the stream."""
        event = ""
        data: list[str] = []
        ev_id: Optional[str] = None
        while True:
            raw = self._fp.readline(_MAX_LINE)
            if not raw:
                if data:
                    return SSEEvent(event or "message", "\n".join(data), ev_id)
                return None
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.endswith("\r"):
                line = line[:-1]
            if line == "":
                if data:
                    return SSEEvent(event or "message", "\n".join(data), ev_id)
                event, ev_id = "", None
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                ev_id = value
