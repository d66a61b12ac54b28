"""Background processes: start, list, (re)attach from an offset, stdin, signal, wait."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from .models import ExecResult, ProcessInfo
from .streams import ExecStream, OutputCallback

if TYPE_CHECKING:
    from .sandbox import Sandbox

__all__ = ["Processes", "Process"]


class Process:
    """A handle on one background process (``pid`` inside the sandbox)."""

    def __init__(self, processes: Processes, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self._ps = processes
        self.pid = pid
        #: The state when the handle was made (``refresh()`` fetches it again).
        self.info = info

    def __repr__(self) -> str:
        return f"Process(pid={self.pid})"

    def refresh(self) -> ProcessInfo:
        self.info = self._ps.get(self.pid).info
        assert self.info is not None
        return self.info

    def stream(self, from_offset: int = 0, **callbacks: Any) -> ExecStream:
        return self._ps.stream(self.pid, from_offset=from_offset, **callbacks)

    def wait(self) -> ExecResult:
        return self._ps.wait(self.pid)

    def send_stdin(self, data: Union[bytes, str], *, eof: bool = False) -> int:
        return self._ps.send_stdin(self.pid, data, eof=eof)

    def close_stdin(self) -> None:
        self._ps.close_stdin(self.pid)

    def signal(self, signal: Union[str, int] = "SIGTERM") -> int:
        return self._ps.signal(self.pid, signal)

    def kill(self) -> int:
        return self._ps.signal(self.pid, "SIGKILL")


class Processes:
    """``Sandbox.processes``: commands that outlive the request, the connection
    and the client that started them; the sandbox keeps each one's last
    1 MiB of output, so any client can reattach from an offset."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox
        self._t = sandbox._t

    def _path(self, pid: Optional[int] = None, rest: str = "") -> str:
        p = self._sb._path("processes")
        if pid is not None:
            p += f"/{int(pid)}"
        return p + rest

    def start(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
              env: Optional[Dict[str, str]] = None, user: Optional[str] = None, stdin: Optional[str] = None,
              timeout_seconds: Optional[int] = None, auto_resume: bool = False) -> Process:
        """Starts ``cmd`` (a string for ``/bin/sh -c``, or an argv list) in the
        background and returns at once. No ``timeout_seconds`` means no
        timeout. Without ``stdin`` its stdin stays open for ``send_stdin``."""
        from .sandbox import exec_body

        body = exec_body(cmd, cwd=cwd, env=env, user=user, stdin=stdin, timeout_seconds=timeout_seconds,
                         auto_resume=auto_resume)
        info = ProcessInfo.from_json(self._t.json("POST", self._path(), json_body=body))
        return Process(self, info.pid, info)

    def list(self) -> List[ProcessInfo]:
        """Background processes (running and recently ended) and running
        foreground commands, by start time."""
        d = self._t.json("GET", self._path())
        return [ProcessInfo.from_json(p) for p in d.get("items") or []]

    def get(self, pid: int) -> Process:
        """The process ``pid`` (``ProcessNotFoundError`` if unknown)."""
        info = ProcessInfo.from_json(self._t.json("GET", self._path(pid)))
        return Process(self, info.pid, info)

    def stream(self, pid: int, *, from_offset: int = 0, on_stdout: Optional[OutputCallback] = None,
               on_stderr: Optional[OutputCallback] = None) -> ExecStream:
        """(Re)attaches to the output of ``pid``: what the sandbox kept from
        byte offset ``from_offset`` on, then live output until it exits.
        Each output event carries ``offset`` (also ``stream.offset``): pass it
        back to resume without gaps or duplicates. Closing the stream only
        stops following; the process runs on."""
        resp = self._t.request("GET", self._path(pid, "/stream"), query={"from": from_offset},
                               headers={"Accept": "text/event-stream"}, stream=True)
        return ExecStream(resp, on_stdout=on_stdout, on_stderr=on_stderr, pid=pid)

    def wait(self, pid: int) -> ExecResult:
        """Blocks until ``pid`` exits; its exit status (output not collected)."""
        info = self.get(pid).info
        assert info is not None
        with self.stream(pid, from_offset=info.output_bytes) as s:
            return s.wait()

    def send_stdin(self, pid: int, data: Union[bytes, str], *, eof: bool = False) -> int:
        """Queues ``data`` for the process's stdin; returns the bytes queued."""
        body: Dict[str, Any] = {}
        if isinstance(data, str):
            body["text"] = data
        else:
            try:
                body["text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                body["b64"] = base64.b64encode(data).decode()
        if eof:
            body["eof"] = True
        d = self._t.json("POST", self._path(pid, "/stdin"), json_body=body)
        return int(d.get("bytes", 0))

    def close_stdin(self, pid: int) -> None:
        self._t.json("POST", self._path(pid, "/stdin"), json_body={"eof": True})

    def signal(self, pid: int, signal: Union[str, int] = "SIGTERM") -> int:
        """Sends ``signal`` (a name with or without ``SIG``, or a number) to
        the process's group; returns the signal number."""
        d = self._t.json("POST", self._path(pid, "/signal"), json_body={"signal": signal}, idempotent=True)
        return int(d.get("signal", 0))
