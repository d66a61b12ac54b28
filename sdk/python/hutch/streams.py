"""Streamed answers: exec/process output and template build progress.

A stream is an iterator of typed events and a context manager. Closing it
(``close()``, leaving the ``with`` block, or dropping out of a ``for`` loop
and closing) closes its connection: for ``exec_stream`` hutchd then kills
the command's process group inside the sandbox; for a process stream it
only stops following (the process runs on).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable, Dict, Iterator, Optional

from ._sse import SSEEvent, SSEReader
from ._transport import Response
from .errors import HutchError, StreamEndedError, make_error
from .models import (
    DroppedEvent,
    ExecEvent,
    ExecResult,
    ExitEvent,
    OutputEvent,
    StartEvent,
    TemplateInfo,
    TemplateLog,
    TemplateStep,
)

__all__ = ["ExecParser", "ExecStream", "TemplateBuild"]

OutputCallback = Callable[[bytes], None]


def _data(ev: SSEEvent) -> Dict[str, Any]:
    try:
        d = json.loads(ev.data) if ev.data else {}
    except ValueError as e:
        raise HutchError(f"bad {ev.event} event: {e}") from e
    return d if isinstance(d, dict) else {}


class _Stream:
    def __init__(self, resp: Response) -> None:
        self._resp = resp
        self._sse = SSEReader(resp)  # type: ignore[arg-type]  # readline is all it needs
        self._done = False

    def _next_sse(self) -> Optional[SSEEvent]:
        return self._sse.next()

    def close(self) -> None:
        """Closes the connection (idempotent)."""
        self._done = True
        self._resp.abort()

    @property
    def closed(self) -> bool:
        return self._done


class ExecParser:
    """The state of an exec or process stream, fed one SSE event at a time
    (shared by the sync and the asyncio streams)."""

    def __init__(self, *, status: int, method: str, path: str, on_start: Optional[Callable[[int], None]] = None,
                 on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                 pid: int = 0) -> None:
        self._status = status
        self._method = method
        self._path = path
        self._on_start = on_start
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self.pid = pid
        #: The offset just past the last output received (process streams),
        #: what to pass as ``from_offset`` to reattach without gaps.
        self.offset = 0
        #: Set once the ``exit`` event arrived.
        self.result: Optional[ExecResult] = None
        self.finished = False

    def ended_error(self) -> StreamEndedError:
        return StreamEndedError(method=self._method, path=self._path)

    def feed(self, ev: SSEEvent) -> Optional[ExecEvent]:
        """The typed event of ``ev`` (``None`` for one to skip); raises
        :class:`StreamEndedError` for an ``error`` event."""
        if ev.id is not None and ev.id.isdigit():
            self.offset = int(ev.id)
        if ev.event == "start":
            d = _data(ev)
            self.pid = int(d.get("pid") or self.pid)
            frm = d.get("from")
            if isinstance(frm, int):
                self.offset = frm
            if self._on_start:
                self._on_start(self.pid)
            return StartEvent(self.pid, self.offset)
        if ev.event in ("stdout", "stderr"):
            d = _data(ev)
            if "text" in d and d["text"] is not None:
                data = str(d["text"]).encode()
            else:
                data = base64.b64decode(str(d.get("b64") or ""))
            cb = self._on_stdout if ev.event == "stdout" else self._on_stderr
            if cb:
                cb(data)
            return OutputEvent(ev.event, data, self.offset if ev.id is not None else None)
        if ev.event == "dropped":
            d = _data(ev)
            return DroppedEvent(int(d.get("from") or 0), int(d.get("oldest") or 0),
                                int(d.get("dropped_bytes") or 0))
        if ev.event == "exit":
            d = _data(ev)
            x = ExitEvent(int(d.get("exit_code") or 0), int(d.get("duration_ms") or 0),
                          bool(d.get("timed_out")), bool(d.get("oom_killed")))
            self.result = ExecResult(exit_code=x.exit_code, timed_out=x.timed_out, oom_killed=x.oom_killed,
                                     duration_ms=x.duration_ms, pid=self.pid)
            self.finished = True
            return x
        if ev.event == "error":
            d = _data(ev)
            if not d.get("code"):
                d = {"message": ev.data}
            cause = make_error(d, status=self._status, method=self._method, path=self._path)
            raise StreamEndedError(cause, method=self._method, path=self._path)
        return None  # unknown events: forward compatibility


class ExecStream(_Stream, ExecParser):
    """The events of ``Sandbox.exec_stream`` or of a process (re)attach.

    Iterate for :class:`StartEvent`, :class:`OutputEvent` (``stream`` is
    ``"stdout"`` or ``"stderr"``), :class:`DroppedEvent` and finally
    :class:`ExitEvent`; the callbacks given at the call see the same output.
    A stream that ends without ``exit`` raises :class:`StreamEndedError`
    (its ``cause`` is the typed error the server sent, if any).
    """

    def __init__(self, resp: Response, *, on_start: Optional[Callable[[int], None]] = None,
                 on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                 pid: int = 0) -> None:
        _Stream.__init__(self, resp)
        ExecParser.__init__(self, status=resp.status, method=resp.method, path=resp.path, on_start=on_start,
                            on_stdout=on_stdout, on_stderr=on_stderr, pid=pid)

    def __iter__(self) -> Iterator[ExecEvent]:
        return self

    def __next__(self) -> ExecEvent:
        if self._done:
            raise StopIteration
        try:
            while True:
                ev = self._next_sse()
                if ev is None:
                    raise self.ended_error()
                out = self.feed(ev)
                if self.finished:
                    self._done = True
                    self._resp.close()
                if out is not None:
                    return out
        except BaseException:
            self.close()
            raise

    def wait(self) -> ExecResult:
        """Reads the stream to its end (output goes to the callbacks) and
        returns the exit status."""
        for _ in self:
            pass
        if self.result is None:
            raise self.ended_error()
        return self.result

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


TemplateEvent = Any  # TemplateStep | TemplateLog | TemplateInfo


class TemplateBuild(_Stream):
    """The progress of a template build: :class:`TemplateStep` and
    :class:`TemplateLog` events, then the built :class:`TemplateInfo`
    (also in ``template``). A failed build raises :class:`BuildFailedError`.
    Closing the stream does not stop the build."""

    def __init__(self, resp: Response, *, on_log: Optional[Callable[[TemplateLog], None]] = None,
                 on_step: Optional[Callable[[TemplateStep], None]] = None) -> None:
        super().__init__(resp)
        self._on_log = on_log
        self._on_step = on_step
        self.template: Optional[TemplateInfo] = None

    def __iter__(self) -> TemplateBuild:
        return self

    def __next__(self) -> TemplateEvent:
        if self._done:
            raise StopIteration
        try:
            while True:
                ev = self._next_sse()
                if ev is None:
                    raise StreamEndedError(method=self._resp.method, path=self._resp.path)
                d = _data(ev)
                if ev.event == "step":
                    st = TemplateStep(int(d.get("index") or 0), int(d.get("of") or 0), str(d.get("name") or ""),
                                      str(d.get("detail") or ""), int(d.get("percent") or 0))
                    if self._on_step:
                        self._on_step(st)
                    return st
                if ev.event == "log":
                    lg = TemplateLog(str(d.get("step") or ""), str(d.get("stream") or ""), str(d.get("text") or ""))
                    if self._on_log:
                        self._on_log(lg)
                    return lg
                if ev.event == "done":
                    t = TemplateInfo.from_json(d.get("template") or {})
                    t.cached = bool(d.get("cached"))
                    self.template = t
                    self._done = True
                    self._resp.close()
                    return t
                if ev.event == "error":
                    raise make_error(d, status=422 if d.get("code") == "build_failed" else self._resp.status,
                                     method=self._resp.method, path=self._resp.path)
        except BaseException:
            self.close()
            raise

    def wait(self) -> TemplateInfo:
        """Follows the build to its end and returns the template."""
        for _ in self:
            pass
        if self.template is None:
            raise StreamEndedError(method=self._resp.method, path=self._resp.path)
        return self.template

    def __enter__(self) -> TemplateBuild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
