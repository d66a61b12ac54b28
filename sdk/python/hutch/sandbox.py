"""A sandbox: its life (create, ttl, pause, fork, snapshot, delete), commands,
background processes, files, terminal, network, ports and code."""

from __future__ import annotations

import json
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._sse import SSEEvent, SSEReader
from ._transport import Response, Transport, new_idempotency_key
from ._websocket import WebSocket
from .errors import SandboxNotFoundError, StreamEndedError, make_error
from .files import Files
from .models import (
    CodeContext,
    CodeError,
    CodeResult,
    ExecResult,
    Execution,
    Metrics,
    NetworkPolicy,
    OutputLine,
    PortResponse,
    SandboxInfo,
    SnapshotInfo,
    VolumeMount,
)
from .processes import Processes
from .pty import Pty
from .streams import ExecStream, OutputCallback

if TYPE_CHECKING:
    from .client import Client, SandboxPager

__all__ = ["Sandbox", "exec_body"]

Network = Union[str, NetworkPolicy, Mapping[str, Any], None]


def exec_body(cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              user: Optional[str] = None, stdin: Optional[str] = None, timeout_seconds: Optional[int] = None,
              auto_resume: bool = False, detach: bool = False) -> Dict[str, Any]:
    """The JSON body of exec, exec/stream and processes."""
    b: Dict[str, Any] = {}
    if isinstance(cmd, str):
        if not cmd:
            raise ValueError("hutch: empty command")
        b["cmd"] = cmd
    else:
        argv = list(cmd)
        if not argv or not argv[0]:
            raise ValueError("hutch: empty argv")
        b["argv"] = argv
    if cwd:
        b["cwd"] = cwd
    if env:
        b["env"] = dict(env)
    if user:
        b["user"] = user
    if stdin is not None:
        b["stdin"] = stdin
    if timeout_seconds is not None:
        b["timeout_seconds"] = int(timeout_seconds)
    if auto_resume:
        b["auto_resume"] = True
    if detach:
        b["detach"] = True
    return b


def network_json(network: Network) -> Optional[Dict[str, Any]]:
    if network is None:
        return None
    if isinstance(network, str):
        return {"mode": network}
    if isinstance(network, NetworkPolicy):
        return network.to_json()
    return dict(network)


class Sandbox:
    """A handle on one sandbox; ``info`` is its state when the handle was made.

    Use it as a context manager to delete the sandbox on exit::

        with Sandbox.create(template="base", ttl_seconds=600) as sb:
            print(sb.exec("echo hi").stdout)
    """

    def __init__(self, client: Client, info: SandboxInfo) -> None:
        self.client = client
        self._t: Transport = client._t
        self.info = info
        #: The sandbox's files.
        self.files = Files(self._t, self._path("fs"))
        #: Background processes.
        self.processes = Processes(self)

    @property
    def id(self) -> str:
        return self.info.id

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, status={self.info.status!r})"

    def _path(self, *rest: str) -> str:
        p = "/v1/sandboxes/" + urllib.parse.quote(self.id, safe="")
        for r in rest:
            p += "/" + r
        return p

    # -- life --------------------------------------------------------------

    @classmethod
    def create(cls, template: Optional[str] = None, *, ttl_seconds: Optional[int] = None,
               env: Optional[Mapping[str, str]] = None, metadata: Optional[Mapping[str, str]] = None,
               cpu: Optional[float] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
               network: Network = None, volumes: Optional[Sequence[Union[VolumeMount, Mapping[str, Any]]]] = None,
               snapshot: Optional[str] = None, auto_pause_seconds: Optional[int] = None, driver: Optional[str] = None,
               idempotency_key: Optional[str] = None, client: Optional[Client] = None) -> Sandbox:
        """Creates a sandbox and returns once it can run commands.

        The request carries an ``Idempotency-Key`` (random per call unless
        given), the same on every retry, so a retried create never makes two
        sandboxes. ``client`` defaults to ``Client()`` (``HUTCH_URL``,
        ``HUTCH_API_KEY``).
        """
        if client is None:
            from .client import Client

            client = Client()
        body: Dict[str, Any] = {}
        for k, v in (("template", template), ("ttl_seconds", ttl_seconds), ("cpu", cpu), ("memory_mb", memory_mb),
                     ("disk_mb", disk_mb), ("snapshot", snapshot), ("auto_pause_seconds", auto_pause_seconds),
                     ("driver", driver)):
            if v is not None:
                body[k] = v
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        net = network_json(network)
        if net is not None:
            body["network"] = net
        if volumes:
            body["volumes"] = [v.to_json() if isinstance(v, VolumeMount) else dict(v) for v in volumes]
        d = client._t.json("POST", "/v1/sandboxes", json_body=body,
                           idempotency_key=idempotency_key or new_idempotency_key())
        return cls(client, SandboxInfo.from_json(d))

    @classmethod
    def connect(cls, sandbox_id: str, *, client: Optional[Client] = None) -> Sandbox:
        """A handle on an existing sandbox (fetched: ``SandboxNotFoundError`` if unknown)."""
        if client is None:
            from .client import Client

            client = Client()
        return client.connect(sandbox_id)

    @classmethod
    def list(cls, *, status: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None,
             limit: Optional[int] = None, client: Optional[Client] = None) -> SandboxPager:
        """``client.list(...)``: an iterator over the sandboxes, page by page as needed."""
        if client is None:
            from .client import Client

            client = Client()
        return client.list(status=status, metadata=metadata, limit=limit)

    def refresh(self) -> SandboxInfo:
        """Fetches the sandbox's current state (also into ``info``)."""
        self.info = SandboxInfo.from_json(self._t.json("GET", self._path()))
        return self.info

    def delete(self) -> None:
        """Deletes the sandbox: kills its processes, frees everything. Idempotent."""
        self._t.request("DELETE", self._path())

    kill = delete

    def close(self) -> None:
        """Deletes the sandbox; one that no longer exists is fine."""
        try:
            self.delete()
        except SandboxNotFoundError:
            pass

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_ttl(self, ttl_seconds: int) -> SandboxInfo:
        """Makes the sandbox expire ``ttl_seconds`` from now."""
        self.info = SandboxInfo.from_json(
            self._t.json("POST", self._path("ttl"), json_body={"ttl_seconds": int(ttl_seconds)}, idempotent=True))
        return self.info

    def pause(self) -> SandboxInfo:
        """Freezes every process (memory kept, CPU stopped); the TTL keeps counting."""
        self.info = SandboxInfo.from_json(self._t.json("POST", self._path("pause"), json_body={}, idempotent=True))
        return self.info

    def resume(self) -> SandboxInfo:
        self.info = SandboxInfo.from_json(self._t.json("POST", self._path("resume"), json_body={}, idempotent=True))
        return self.info

    def metrics(self) -> Metrics:
        return Metrics.from_json(self._t.json("GET", self._path("metrics")))

    def snapshot(self) -> SnapshotInfo:
        """Saves the sandbox's files (consistently: processes frozen meanwhile);
        ``Sandbox.create(snapshot=snap.id)`` starts from it."""
        return SnapshotInfo.from_json(self._t.json("POST", self._path("snapshots"), json_body={}))

    def fork(self, count: int = 1) -> List[Sandbox]:
        """``count`` (1-16) new sandboxes from this one's current files; all or nothing."""
        d = self._t.json("POST", self._path("fork"), json_body={"count": int(count)})
        return [Sandbox(self.client, SandboxInfo.from_json(s)) for s in d.get("sandboxes") or []]

    # -- commands ----------------------------------------------------------

    def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None, user: Optional[str] = None, stdin: Optional[str] = None,
             timeout_seconds: Optional[int] = None, auto_resume: bool = False, check: bool = False) -> ExecResult:
        """Runs ``cmd`` (a string for ``/bin/sh -c``, or an argv list) and waits.

        A non-zero exit is not an error unless ``check`` (then
        :class:`CommandError`). ``timeout_seconds`` kills the command's group
        inside the sandbox (server default 60; 0 = none). Output over the
        server's per-stream limit is cut (``truncated``): use ``exec_stream``.
        """
        body = exec_body(cmd, cwd=cwd, env=env, user=user, stdin=stdin, timeout_seconds=timeout_seconds,
                         auto_resume=auto_resume)
        res = ExecResult.from_json(self._t.json("POST", self._path("exec"), json_body=body))
        if check and not res.ok:
            raise CommandError(res)
        return res

    def exec_stream(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, user: Optional[str] = None,
                    stdin: Optional[str] = None, timeout_seconds: Optional[int] = None, auto_resume: bool = False,
                    detach: bool = False, on_start: Optional[Callable[[int], None]] = None,
                    on_stdout: Optional[OutputCallback] = None,
                    on_stderr: Optional[OutputCallback] = None) -> ExecStream:
        """Runs ``cmd`` and streams its events as they happen.

        Iterate the returned :class:`ExecStream` (or call ``wait()`` with
        callbacks). Closing it before the exit closes the connection, and
        hutchd kills the command inside the sandbox (unless ``detach``).
        """
        body = exec_body(cmd, cwd=cwd, env=env, user=user, stdin=stdin, timeout_seconds=timeout_seconds,
                         auto_resume=auto_resume, detach=detach)
        resp = self._t.request("POST", self._path("exec", "stream"), json_body=body,
                               headers={"Accept": "text/event-stream"}, stream=True)
        return ExecStream(resp, on_start=on_start, on_stdout=on_stdout, on_stderr=on_stderr)

    # -- terminal ----------------------------------------------------------

    def pty(self, *, cols: int = 80, rows: int = 24, cmd: Optional[str] = None, user: Optional[str] = None,
            cwd: Optional[str] = None) -> Pty:
        """Opens an interactive terminal (a login shell, or ``cmd``) over a WebSocket."""
        q: Dict[str, Any] = {"cols": cols, "rows": rows, "cmd": cmd, "user": user, "cwd": cwd}
        target = self._t.url(self._path("pty"), q)
        ws = WebSocket.connect(self._t.scheme, self._t.host, self._t.port, target, self._t.headers(),
                               self._t.timeout or 60.0)
        return Pty(ws)

    # -- network and ports -------------------------------------------------

    def network(self) -> NetworkPolicy:
        return NetworkPolicy.from_json(self._t.json("GET", self._path("network")))

    def set_network(self, network: Union[str, NetworkPolicy, Mapping[str, Any]]) -> NetworkPolicy:
        """Replaces the network policy (new connections at once)."""
        d = self._t.json("PUT", self._path("network"), json_body=network_json(network))
        return NetworkPolicy.from_json(d) if isinstance(d, dict) else self.network()

    def url(self, port: int, path: str = "/") -> str:
        """The URL that relays to ``port`` inside the sandbox (send the API key
        as ``Authorization: Bearer``)."""
        return self._t.base_url + self._path("ports", str(int(port))) + "/" + path.lstrip("/")

    def port_request(self, port: int, path: str = "/", *, method: str = "GET", body: Optional[bytes] = None,
                     headers: Optional[Mapping[str, str]] = None) -> PortResponse:
        """Sends one HTTP request to the server on ``port`` inside the sandbox.
        Its own answers (any status) come back as they are; hutch's errors
        (e.g. ``PortUnreachableError``) raise."""
        target = self._path("ports", str(int(port))) + "/" + path.lstrip("/")
        resp = self._t.request(method, target, body=body, headers=dict(headers or {}), stream=True,
                               ok_statuses=tuple(range(100, 600)))
        try:
            data = resp.read()
        finally:
            resp.close()
        if resp.status >= 400:
            # hutch's own refusal (not the sandbox server's): its JSON body
            # carries the request id hutchd answered in X-Request-Id.
            try:
                d = json.loads(data)
            except ValueError:
                d = None
            rid = resp.headers.get("X-Request-Id") or ""
            if isinstance(d, dict) and d.get("code") and d.get("request_id") == rid:
                raise make_error(d, status=resp.status, method=method, path=target)
        return PortResponse(resp.status, {k: v for k, v in resp.headers.items()}, data)

    # -- code interpreter --------------------------------------------------

    def run_code(self, code: str, *, language: Optional[str] = None, context_id: Optional[str] = None,
                 env_vars: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None,
                 on_stdout: Optional[Callable[[OutputLine], None]] = None,
                 on_stderr: Optional[Callable[[OutputLine], None]] = None,
                 on_result: Optional[Callable[[CodeResult], None]] = None) -> Execution:
        """Runs ``code`` in a stateful context (sandboxes of the
        ``code-interpreter`` template). An exception in the code is
        ``Execution.error``, not a Python exception here."""
        body: Dict[str, Any] = {"code": code}
        if language:
            body["language"] = language
        if context_id:
            body["context_id"] = context_id
        if env_vars:
            body["env_vars"] = dict(env_vars)
        if timeout_ms:
            body["timeout_ms"] = int(timeout_ms)
        resp = self._t.request("POST", self._path("code"), json_body=body,
                               headers={"Accept": "text/event-stream"}, stream=True)
        try:
            return _consume_code(resp, on_stdout, on_stderr, on_result)
        finally:
            resp.abort()

    def create_code_context(self, language: str = "python", cwd: Optional[str] = None) -> CodeContext:
        body: Dict[str, Any] = {"language": language}
        if cwd:
            body["cwd"] = cwd
        return CodeContext.from_json(self._t.json("POST", self._path("code", "contexts"), json_body=body))

    def code_contexts(self) -> List[CodeContext]:
        d = self._t.json("GET", self._path("code", "contexts"))
        return [CodeContext.from_json(c) for c in d.get("items") or []]

    def remove_code_context(self, context_id: str) -> None:
        self._t.request("DELETE", self._path("code", "contexts", urllib.parse.quote(context_id, safe="")))

    def restart_code_context(self, context_id: str) -> None:
        self._t.request("POST", self._path("code", "contexts", urllib.parse.quote(context_id, safe=""), "restart"))

    def interrupt_code_context(self, context_id: str) -> None:
        self._t.request("POST", self._path("code", "contexts", urllib.parse.quote(context_id, safe=""), "interrupt"))


class CommandError(Exception):
    """``exec(..., check=True)`` of a command that did not exit 0."""

    def __init__(self, result: ExecResult) -> None:
        super().__init__(f"command exited {result.exit_code}: {result.stderr[-500:]}")
        self.result = result


class CodeParser:
    """The state of a ``run_code`` stream, fed one SSE event at a time."""

    def __init__(self, resp_status: int, method: str, path: str,
                 on_stdout: Optional[Callable[[OutputLine], None]] = None,
                 on_stderr: Optional[Callable[[OutputLine], None]] = None,
                 on_result: Optional[Callable[[CodeResult], None]] = None) -> None:
        self.execution = Execution()
        self._status, self._method, self._path = resp_status, method, path
        self._on_stdout, self._on_stderr, self._on_result = on_stdout, on_stderr, on_result

    def feed(self, ev: SSEEvent) -> bool:
        """Takes one event; ``True`` at the run's ``end``."""
        ex = self.execution
        try:
            d = json.loads(ev.data) if ev.data else {}
        except ValueError:
            return False
        if not isinstance(d, dict):
            return False
        if ev.event in ("stdout", "stderr"):
            line = OutputLine(str(d.get("text") or ""), str(d.get("timestamp") or ""))
            (ex.stdout if ev.event == "stdout" else ex.stderr).append(line)
            cb = self._on_stdout if ev.event == "stdout" else self._on_stderr
            if cb:
                cb(line)
        elif ev.event == "result":
            r = CodeResult.from_json(d)
            ex.results.append(r)
            if self._on_result:
                self._on_result(r)
        elif ev.event == "error":
            if "name" in d:
                ex.error = CodeError(str(d.get("name") or ""), str(d.get("value") or ""),
                                     str(d.get("traceback") or ""))
            else:
                raise StreamEndedError(make_error(d, status=self._status, method=self._method, path=self._path))
        elif ev.event == "end":
            ex.execution_count = int(d.get("execution_count") or 0)
            ex.timed_out = bool(d.get("timed_out"))
            return True
        return False


def _consume_code(resp: Response, on_stdout: Optional[Callable[[OutputLine], None]],
                  on_stderr: Optional[Callable[[OutputLine], None]],
                  on_result: Optional[Callable[[CodeResult], None]]) -> Execution:
    parser = CodeParser(resp.status, resp.method, resp.path, on_stdout, on_stderr, on_result)
    sse = SSEReader(resp)  # type: ignore[arg-type]
    while True:
        ev = sse.next()
        if ev is None:
            raise StreamEndedError(method=resp.method, path=resp.path)
        if parser.feed(ev):
            return parser.execution


def _iter_pages(t: Transport, path: str, query: Dict[str, Any]) -> Iterator[List[Dict[str, Any]]]:
    q = dict(query)
    while True:
        d = t.json("GET", path, query=q)
        yield list(d.get("items") or [])
        nxt = d.get("next_cursor")
        if not nxt:
            return
        q["cursor"] = nxt
