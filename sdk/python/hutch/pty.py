"""An interactive terminal in a sandbox, over hutchd's PTY WebSocket."""

from __future__ import annotations

import json
from typing import Iterator, Optional, Union

from ._websocket import OP_BINARY, OP_TEXT, WebSocket, WebSocketClosedError
from .errors import HutchError, StreamEndedError, make_error
from .models import ExitEvent

__all__ = ["Pty"]


class Pty:
    """A pseudo-terminal: ``write`` keystrokes, ``read`` screen output,
    ``resize``. ``read`` returns ``b""`` once the shell exited (``exit`` then
    holds its status). Closing hangs the terminal up: SIGHUP to its session,
    SIGKILL 0.5 s later. Iterating yields output chunks until the exit."""

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        #: The shell's exit status, once it exited.
        self.exit: Optional[ExitEvent] = None
        self._error: Optional[HutchError] = None
        self._closed_by_us = False

    def write(self, data: Union[bytes, str]) -> None:
        self._ws.send_binary(data.encode() if isinstance(data, str) else data)

    def resize(self, cols: int, rows: int) -> None:
        self._ws.send_text(json.dumps({"resize": {"cols": cols, "rows": rows}}))

    def read(self) -> bytes:
        """The next chunk of terminal output (blocking); ``b""`` at the end.
        Raises :class:`StreamEndedError` when the sandbox went away."""
        while True:
            if self._ws.closed and self.exit is not None:
                return b""
            try:
                op, payload = self._ws.recv()
            except WebSocketClosedError:
                if self._error is not None:
                    raise StreamEndedError(self._error) from None
                if self.exit is None and not self._closed_by_us:
                    raise StreamEndedError() from None
                return b""
            if op == OP_BINARY:
                return payload
            if op == OP_TEXT:
                try:
                    msg = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(msg, dict) and isinstance(msg.get("exit"), dict):
                    e = msg["exit"]
                    self.exit = ExitEvent(int(e.get("exit_code") or 0), int(e.get("duration_ms") or 0),
                                          bool(e.get("timed_out")), bool(e.get("oom_killed")))
                elif isinstance(msg, dict) and isinstance(msg.get("error"), dict):
                    self._error = make_error(msg["error"], status=200)

    def read_until(self, marker: Union[bytes, str], limit: int = 1 << 20) -> bytes:
        """Reads output until it contains ``marker`` (or the end); returns all of it."""
        m = marker.encode() if isinstance(marker, str) else marker
        out = b""
        while m not in out and len(out) < limit:
            chunk = self.read()
            if not chunk:
                break
            out += chunk
        return out

    def wait(self) -> ExitEvent:
        """Reads (and drops) output until the shell exits; its status."""
        while self.read():
            pass
        if self.exit is None:
            raise StreamEndedError()
        return self.exit

    def close(self) -> None:
        self._closed_by_us = True
        self._ws.close()

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = self.read()
            if not chunk:
                return
            yield chunk

    def __enter__(self) -> Pty:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
