"""The asyncio client: the same calls as the sync client, awaited.

::

    from hutch.aio import AsyncClient

    async with AsyncClient() as c:
        async with await c.create(ttl_seconds=600) as sb:
            print((await sb.exec("echo hi")).stdout)
            async with await sb.exec_stream("make") as s:
                async for ev in s:
                    ...

Standard library only (asyncio streams). Cancelling a task that awaits an
exec, or closing an ``AsyncExecStream``, closes its connection, and hutchd
kills the command inside the sandbox.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import urllib.parse
from typing import (
    IO,
    Any,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)

from ._aio_transport import AsyncResponse, AsyncTransport
from ._retry import RetryPolicy
from ._sse import SSEDecoder, SSEEvent
from ._transport import new_idempotency_key
from ._websocket import _GUID, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT, _mask
from .errors import (
    FileNotFoundInSandboxError,
    HutchConnectionError,
    HutchError,
    SandboxNotFoundError,
    StreamEndedError,
    make_error,
)
from .models import (
    CodeContext,
    CodeResult,
    EntryInfo,
    ExecEvent,
    ExecResult,
    Execution,
    ExitEvent,
    Metrics,
    NetworkPolicy,
    OutputLine,
    ProcessInfo,
    SandboxInfo,
    SnapshotInfo,
    TemplateInfo,
    VolumeInfo,
    VolumeMount,
    WriteInfo,
)
from .sandbox import CodeParser, CommandError, Network, exec_body, network_json
from .streams import ExecParser, OutputCallback

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncFiles", "AsyncProcesses", "AsyncProcess", "AsyncExecStream",
           "AsyncPty", "AsyncVolume"]


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


async def _next_sse(resp: AsyncResponse, dec: SSEDecoder) -> Optional[SSEEvent]:
    while True:
        raw = await resp.readline()
        if not raw:
            return dec.finish()
        ev = dec.line(raw)
        if ev is not None:
            return ev


class AsyncExecStream(ExecParser):
    """``async for`` the events of an exec or process stream; ``await wait()``
    for the exit status; ``await aclose()`` (or ``async with``) to stop."""

    def __init__(self, resp: AsyncResponse, **kw: Any) -> None:
        super().__init__(status=resp.status, method=resp.method, path=resp.path, **kw)
        self._resp = resp
        self._dec = SSEDecoder()
        self._closed = False

    def __aiter__(self) -> AsyncIterator[ExecEvent]:
        return self

    async def __anext__(self) -> ExecEvent:
        if self._closed:
            raise StopAsyncIteration
        try:
            while True:
                ev = await _next_sse(self._resp, self._dec)
                if ev is None:
                    raise self.ended_error()
                out = self.feed(ev)
                if self.finished:
                    self._closed = True
                    await self._resp.aclose()
                if out is not None:
                    return out
        except BaseException:  # CancelledError included: the connection goes, the command dies
            self.close()
            raise

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        if self.result is None:
            raise self.ended_error()
        return self.result

    def close(self) -> None:
        self._closed = True
        self._resp.abort()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> AsyncExecStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncFileReader:
    """A download as it streams in: ``await read(n)``, ``async for chunk in r``."""

    def __init__(self, resp: AsyncResponse) -> None:
        self._resp = resp
        length = resp.headers.get("content-length")
        self.length: Optional[int] = int(length) if length and length.isdigit() else None

    async def read(self, n: int = -1) -> bytes:
        return await self._resp.read(n)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._resp.read(1 << 20)
            if not chunk:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._resp.aclose()

    async def __aenter__(self) -> AsyncFileReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


AsyncData = Union[bytes, bytearray, str, IO[bytes], Iterable[bytes], AsyncIterable[bytes]]


class AsyncFiles:
    """The async twin of :class:`hutch.Files`."""

    def __init__(self, t: AsyncTransport, base: str) -> None:
        self._t = t
        self._base = base

    @staticmethod
    def _qs(path: str, user: Optional[str], **extra: Any) -> Dict[str, Any]:
        q: Dict[str, Any] = {"path": path, "user": user}
        q.update(extra)
        return q

    async def write(self, path: str, data: AsyncData, *, mode: Optional[int] = None,
                    user: Optional[str] = None) -> WriteInfo:
        body: Any = data.encode() if isinstance(data, str) else bytes(data) if isinstance(data, bytearray) else data
        q = self._qs(path, user, mode=f"{mode:04o}" if mode is not None else None)
        d = await self._t.json("PUT", self._base, query=q, body=body,
                               headers={"Content-Type": "application/octet-stream"})
        return WriteInfo(str(d.get("path", path)), int(d.get("size", 0)))

    async def open(self, path: str, *, offset: int = 0, length: Optional[int] = None,
                   user: Optional[str] = None) -> AsyncFileReader:
        headers: Dict[str, str] = {}
        if offset or length is not None:
            headers["Range"] = f"bytes={offset}-{'' if length is None else offset + length - 1}"
        return AsyncFileReader(await self._t.request("GET", self._base, query=self._qs(path, user),
                                                     headers=headers, stream=True))

    async def read(self, path: str, *, offset: int = 0, length: Optional[int] = None,
                   user: Optional[str] = None) -> bytes:
        if length == 0:
            return b""
        async with await self.open(path, offset=offset, length=length, user=user) as r:
            return await r.read()

    async def read_text(self, path: str, *, user: Optional[str] = None) -> str:
        return (await self.read(path, user=user)).decode()

    async def list(self, path: str, *, depth: int = 1, user: Optional[str] = None) -> List[EntryInfo]:
        d = await self._t.json("GET", self._base + "/list", query=self._qs(path, user, depth=depth))
        return [EntryInfo.from_json(e) for e in d.get("entries") or []]

    async def stat(self, path: str, *, user: Optional[str] = None) -> EntryInfo:
        return EntryInfo.from_json(await self._t.json("GET", self._base + "/stat", query=self._qs(path, user)))

    async def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            await self.stat(path, user=user)
        except FileNotFoundInSandboxError:
            return False
        return True

    async def mkdir(self, path: str, *, user: Optional[str] = None) -> EntryInfo:
        body = {"path": path, **({"user": user} if user else {})}
        return EntryInfo.from_json(await self._t.json("POST", self._base + "/mkdir", json_body=body,
                                                      idempotent=True))

    async def move(self, src: str, dst: str, *, user: Optional[str] = None) -> EntryInfo:
        body = {"from": src, "to": dst, **({"user": user} if user else {})}
        return EntryInfo.from_json(await self._t.json("POST", self._base + "/move", json_body=body))

    async def remove(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        await self._t.request("DELETE", self._base,
                              query=self._qs(path, user, recursive=True if recursive else None))


class AsyncProcess:
    def __init__(self, ps: AsyncProcesses, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self._ps, self.pid, self.info = ps, pid, info

    async def stream(self, from_offset: int = 0, **kw: Any) -> AsyncExecStream:
        return await self._ps.stream(self.pid, from_offset=from_offset, **kw)

    async def wait(self) -> ExecResult:
        return await self._ps.wait(self.pid)

    async def send_stdin(self, data: Union[bytes, str], *, eof: bool = False) -> int:
        return await self._ps.send_stdin(self.pid, data, eof=eof)

    async def signal(self, signal: Union[str, int] = "SIGTERM") -> int:
        return await self._ps.signal(self.pid, signal)

    async def kill(self) -> int:
        return await self._ps.signal(self.pid, "SIGKILL")


class AsyncProcesses:
    def __init__(self, sb: AsyncSandbox) -> None:
        self._sb = sb
        self._t = sb._t

    def _path(self, pid: Optional[int] = None, rest: str = "") -> str:
        return self._sb._path("processes") + (f"/{int(pid)}" if pid is not None else "") + rest

    async def start(self, cmd: Union[str, Sequence[str]], **kw: Any) -> AsyncProcess:
        info = ProcessInfo.from_json(await self._t.json("POST", self._path(), json_body=exec_body(cmd, **kw)))
        return AsyncProcess(self, info.pid, info)

    async def list(self) -> List[ProcessInfo]:
        d = await self._t.json("GET", self._path())
        return [ProcessInfo.from_json(p) for p in d.get("items") or []]

    async def get(self, pid: int) -> AsyncProcess:
        info = ProcessInfo.from_json(await self._t.json("GET", self._path(pid)))
        return AsyncProcess(self, info.pid, info)

    async def stream(self, pid: int, *, from_offset: int = 0, on_stdout: Optional[OutputCallback] = None,
                     on_stderr: Optional[OutputCallback] = None) -> AsyncExecStream:
        resp = await self._t.request("GET", self._path(pid, "/stream"), query={"from": from_offset},
                                     headers={"Accept": "text/event-stream"}, stream=True)
        return AsyncExecStream(resp, on_stdout=on_stdout, on_stderr=on_stderr, pid=pid)

    async def wait(self, pid: int) -> ExecResult:
        info = (await self.get(pid)).info
        assert info is not None
        async with await self.stream(pid, from_offset=info.output_bytes) as s:
            return await s.wait()

    async def send_stdin(self, pid: int, data: Union[bytes, str], *, eof: bool = False) -> int:
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
        return int((await self._t.json("POST", self._path(pid, "/stdin"), json_body=body)).get("bytes", 0))

    async def signal(self, pid: int, signal: Union[str, int] = "SIGTERM") -> int:
        d = await self._t.json("POST", self._path(pid, "/signal"), json_body={"signal": signal}, idempotent=True)
        return int(d.get("signal", 0))


class AsyncPty:
    """The async twin of :class:`hutch.Pty` (RFC 6455 over asyncio streams)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._r, self._w = reader, writer
        self.exit: Optional[ExitEvent] = None
        self._error: Optional[HutchError] = None
        self._closed = False

    async def _send(self, op: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
                                     if n < 1 << 16 else bytes([0x80 | 127]) + struct.pack("!Q", n))
        mask = os.urandom(4)
        self._w.write(head + mask + _mask(payload, mask))
        await self._w.drain()

    async def write(self, data: Union[bytes, str]) -> None:
        await self._send(OP_BINARY, data.encode() if isinstance(data, str) else data)

    async def resize(self, cols: int, rows: int) -> None:
        await self._send(OP_TEXT, json.dumps({"resize": {"cols": cols, "rows": rows}}).encode())

    async def _frame(self) -> tuple[bool, int, bytes]:
        b0, b1 = await self._r.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self._r.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self._r.readexactly(8))
        mask = await self._r.readexactly(4) if b1 & 0x80 else b""
        payload = await self._r.readexactly(n)
        return bool(b0 & 0x80), b0 & 0x0F, _mask(payload, mask) if mask else payload

    async def read(self) -> bytes:
        """The next chunk of output; ``b""`` once the shell exited."""
        parts: List[bytes] = []
        op = 0
        while True:
            if self._closed:
                return b""
            try:
                fin, fop, payload = await self._frame()
            except (asyncio.IncompleteReadError, OSError):
                self._closed = True
                if self._error is not None:
                    raise StreamEndedError(self._error) from None
                if self.exit is None:
                    raise StreamEndedError() from None
                return b""
            if fop == OP_PING:
                await self._send(OP_PONG, payload)
                continue
            if fop == OP_PONG:
                continue
            if fop == OP_CLOSE:
                self._closed = True
                self._w.transport.abort()
                if self._error is not None:
                    raise StreamEndedError(self._error)
                return b""
            if fop != OP_CONT:
                op = fop
            parts.append(payload)
            if not fin:
                continue
            msg, parts = b"".join(parts), []
            if op == OP_BINARY:
                return msg
            try:
                d = json.loads(msg)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("exit"), dict):
                e = d["exit"]
                self.exit = ExitEvent(int(e.get("exit_code") or 0), int(e.get("duration_ms") or 0),
                                      bool(e.get("timed_out")), bool(e.get("oom_killed")))
            elif isinstance(d, dict) and isinstance(d.get("error"), dict):
                self._error = make_error(d["error"], status=200)

    async def read_until(self, marker: Union[bytes, str], limit: int = 1 << 20) -> bytes:
        m = marker.encode() if isinstance(marker, str) else marker
        out = b""
        while m not in out and len(out) < limit:
            chunk = await self.read()
            if not chunk:
                break
            out += chunk
        return out

    async def wait(self) -> ExitEvent:
        while await self.read():
            pass
        if self.exit is None:
            raise StreamEndedError()
        return self.exit

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                await self._send(OP_CLOSE, struct.pack("!H", 1000))
            except OSError:
                pass
            self._w.transport.abort()

    async def __aenter__(self) -> AsyncPty:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncSandbox:
    """The async twin of :class:`hutch.Sandbox` (``async with`` deletes it on exit)."""

    def __init__(self, client: AsyncClient, info: SandboxInfo) -> None:
        self.client = client
        self._t = client._t
        self.info = info
        self.files = AsyncFiles(self._t, self._path("fs"))
        self.processes = AsyncProcesses(self)

    @property
    def id(self) -> str:
        return self.info.id

    def __repr__(self) -> str:
        return f"AsyncSandbox(id={self.id!r}, status={self.info.status!r})"

    def _path(self, *rest: str) -> str:
        return "/v1/sandboxes/" + _q(self.id) + "".join("/" + r for r in rest)

    async def refresh(self) -> SandboxInfo:
        self.info = SandboxInfo.from_json(await self._t.json("GET", self._path()))
        return self.info

    async def delete(self) -> None:
        await self._t.request("DELETE", self._path())

    async def close(self) -> None:
        try:
            await self.delete()
        except SandboxNotFoundError:
            pass

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Shielded: a cancelled task still deletes its sandbox.
        await asyncio.shield(self.close())

    async def _info(self, path: str, body: Dict[str, Any]) -> SandboxInfo:
        self.info = SandboxInfo.from_json(await self._t.json("POST", self._path(path), json_body=body,
                                                             idempotent=True))
        return self.info

    async def set_ttl(self, ttl_seconds: int) -> SandboxInfo:
        return await self._info("ttl", {"ttl_seconds": int(ttl_seconds)})

    async def pause(self) -> SandboxInfo:
        return await self._info("pause", {})

    async def resume(self) -> SandboxInfo:
        return await self._info("resume", {})

    async def metrics(self) -> Metrics:
        return Metrics.from_json(await self._t.json("GET", self._path("metrics")))

    async def snapshot(self) -> SnapshotInfo:
        return SnapshotInfo.from_json(await self._t.json("POST", self._path("snapshots"), json_body={}))

    async def fork(self, count: int = 1) -> List[AsyncSandbox]:
        d = await self._t.json("POST", self._path("fork"), json_body={"count": int(count)})
        return [AsyncSandbox(self.client, SandboxInfo.from_json(s)) for s in d.get("sandboxes") or []]

    async def exec(self, cmd: Union[str, Sequence[str]], *, check: bool = False, **kw: Any) -> ExecResult:
        """Runs ``cmd`` and waits; cancelling the awaiting task kills it in the sandbox."""
        resp = await self._t.request("POST", self._path("exec"), json_body=exec_body(cmd, **kw), stream=True)
        try:
            res = ExecResult.from_json(await resp.json())
        finally:
            resp.abort()  # no-op after a full read; on cancellation, the connection goes
        if check and not res.ok:
            raise CommandError(res)
        return res

    async def exec_stream(self, cmd: Union[str, Sequence[str]], *, on_start: Optional[Callable[[int], None]] = None,
                          on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
                          **kw: Any) -> AsyncExecStream:
        resp = await self._t.request("POST", self._path("exec", "stream"), json_body=exec_body(cmd, **kw),
                                     headers={"Accept": "text/event-stream"}, stream=True)
        return AsyncExecStream(resp, on_start=on_start, on_stdout=on_stdout, on_stderr=on_stderr)

    async def pty(self, *, cols: int = 80, rows: int = 24, cmd: Optional[str] = None, user: Optional[str] = None,
                  cwd: Optional[str] = None) -> AsyncPty:
        target = self._t.url(self._path("pty"), {"cols": cols, "rows": rows, "cmd": cmd, "user": user, "cwd": cwd})
        try:
            r, w = await asyncio.open_connection(self._t.host, self._t.port)
        except OSError as e:
            raise HutchConnectionError(f"connecting: {e}", method="GET", path=target) from e
        key = base64.b64encode(os.urandom(16)).decode()
        hdrs = {"Host": f"{self._t.host}:{self._t.port}", "Upgrade": "websocket", "Connection": "Upgrade",
                "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13", **self._t.headers()}
        w.write((f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode())
        await w.drain()
        status_line = await r.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        rh: Dict[str, str] = {}
        while True:
            h = await r.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            rh[k.strip().lower()] = v.strip()
        if status != 101:
            n = int(rh.get("content-length", "0") or 0)
            raw = await r.readexactly(n) if n else b""
            w.transport.abort()
            raise AsyncTransport._error(status, "", rh, raw, "GET", target)
        import hashlib

        want = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if rh.get("sec-websocket-accept") != want:
            w.transport.abort()
            raise HutchError("websocket handshake: bad Sec-WebSocket-Accept", method="GET", path=target)
        return AsyncPty(r, w)

    async def network(self) -> NetworkPolicy:
        return NetworkPolicy.from_json(await self._t.json("GET", self._path("network")))

    async def set_network(self, network: Union[str, NetworkPolicy, Mapping[str, Any]]) -> NetworkPolicy:
        await self._t.request("PUT", self._path("network"), json_body=network_json(network))
        return await self.network()

    def url(self, port: int, path: str = "/") -> str:
        return self._t.base_url + self._path("ports", str(int(port))) + "/" + path.lstrip("/")

    async def run_code(self, code: str, *, language: Optional[str] = None, context_id: Optional[str] = None,
                       env_vars: Optional[Mapping[str, str]] = None, timeout_ms: Optional[int] = None,
                       on_stdout: Optional[Callable[[OutputLine], None]] = None,
                       on_stderr: Optional[Callable[[OutputLine], None]] = None,
                       on_result: Optional[Callable[[CodeResult], None]] = None) -> Execution:
        body: Dict[str, Any] = {"code": code}
        for k, v in (("language", language), ("context_id", context_id), ("timeout_ms", timeout_ms)):
            if v:
                body[k] = v
        if env_vars:
            body["env_vars"] = dict(env_vars)
        resp = await self._t.request("POST", self._path("code"), json_body=body,
                                     headers={"Accept": "text/event-stream"}, stream=True)
        parser = CodeParser(resp.status, resp.method, resp.path, on_stdout, on_stderr, on_result)
        dec = SSEDecoder()
        try:
            while True:
                ev = await _next_sse(resp, dec)
                if ev is None:
                    raise StreamEndedError(method=resp.method, path=resp.path)
                if parser.feed(ev):
                    return parser.execution
        finally:
            resp.abort()

    async def create_code_context(self, language: str = "python", cwd: Optional[str] = None) -> CodeContext:
        body = {"language": language, **({"cwd": cwd} if cwd else {})}
        return CodeContext.from_json(await self._t.json("POST", self._path("code", "contexts"), json_body=body))

    async def code_contexts(self) -> List[CodeContext]:
        d = await self._t.json("GET", self._path("code", "contexts"))
        return [CodeContext.from_json(c) for c in d.get("items") or []]

    async def remove_code_context(self, context_id: str) -> None:
        await self._t.request("DELETE", self._path("code", "contexts", _q(context_id)))


class AsyncVolume:
    def __init__(self, client: AsyncClient, info: VolumeInfo) -> None:
        self.info, self.name = info, info.name
        self.files = AsyncFiles(client._t, "/v1/volumes/" + _q(info.name) + "/fs")

    def mount(self, path: str, *, read_only: bool = False) -> VolumeMount:
        return VolumeMount(self.name, path, read_only)


class AsyncClient:
    """The async twin of :class:`hutch.Client` (same arguments and environment)."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 retry: Optional[RetryPolicy] = None, timeout: Optional[float] = None,
                 user_agent: Optional[str] = None) -> None:
        self._t = AsyncTransport(url, api_key, retry=retry, timeout=timeout, user_agent=user_agent)

    @property
    def url(self) -> str:
        return self._t.base_url

    async def aclose(self) -> None:
        await self._t.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def health(self) -> Dict[str, Any]:
        d = await self._t.json("GET", "/healthz")
        return d if isinstance(d, dict) else {}

    async def create(self, template: Optional[str] = None, *, ttl_seconds: Optional[int] = None,
                     env: Optional[Mapping[str, str]] = None, metadata: Optional[Mapping[str, str]] = None,
                     cpu: Optional[float] = None, memory_mb: Optional[int] = None, disk_mb: Optional[int] = None,
                     network: Network = None,
                     volumes: Optional[Sequence[Union[VolumeMount, Mapping[str, Any]]]] = None,
                     snapshot: Optional[str] = None, auto_pause_seconds: Optional[int] = None,
                     driver: Optional[str] = None, idempotency_key: Optional[str] = None) -> AsyncSandbox:
        """Creates a sandbox (with an ``Idempotency-Key`` kept across retries)."""
        body: Dict[str, Any] = {k: v for k, v in (
            ("template", template), ("ttl_seconds", ttl_seconds), ("cpu", cpu), ("memory_mb", memory_mb),
            ("disk_mb", disk_mb), ("snapshot", snapshot), ("auto_pause_seconds", auto_pause_seconds),
            ("driver", driver)) if v is not None}
        if env:
            body["env"] = dict(env)
        if metadata:
            body["metadata"] = dict(metadata)
        if network is not None:
            body["network"] = network_json(network)
        if volumes:
            body["volumes"] = [v.to_json() if isinstance(v, VolumeMount) else dict(v) for v in volumes]
        d = await self._t.json("POST", "/v1/sandboxes", json_body=body,
                               idempotency_key=idempotency_key or new_idempotency_key())
        return AsyncSandbox(self, SandboxInfo.from_json(d))

    async def connect(self, sandbox_id: str) -> AsyncSandbox:
        return AsyncSandbox(self, SandboxInfo.from_json(await self._t.json("GET", "/v1/sandboxes/" + _q(sandbox_id))))

    def sandbox(self, sandbox_id: str) -> AsyncSandbox:
        return AsyncSandbox(self, SandboxInfo(id=sandbox_id))

    async def list(self, *, status: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None,
                   limit: Optional[int] = None) -> AsyncIterator[AsyncSandbox]:
        """``async for sb in await client.list(...)``: every page, fetched as needed."""
        q: Dict[str, Any] = {"status": status, "limit": limit}
        for k, v in (metadata or {}).items():
            q["metadata." + k] = v

        async def gen() -> AsyncIterator[AsyncSandbox]:
            while True:
                d = await self._t.json("GET", "/v1/sandboxes", query=q)
                for item in d.get("items") or []:
                    yield AsyncSandbox(self, SandboxInfo.from_json(item))
                if not d.get("next_cursor"):
                    return
                q["cursor"] = d["next_cursor"]

        return gen()

    async def delete(self, sandbox_id: str) -> None:
        await self._t.request("DELETE", "/v1/sandboxes/" + _q(sandbox_id))

    async def create_volume(self, name: str, size_mb: Optional[int] = None) -> AsyncVolume:
        body: Dict[str, Any] = {"name": name, **({"size_mb": int(size_mb)} if size_mb else {})}
        return AsyncVolume(self, VolumeInfo.from_json(await self._t.json("POST", "/v1/volumes", json_body=body)))

    async def volumes(self) -> List[AsyncVolume]:
        d = await self._t.json("GET", "/v1/volumes")
        return [AsyncVolume(self, VolumeInfo.from_json(v)) for v in d.get("volumes") or []]

    async def delete_volume(self, name: str) -> None:
        await self._t.request("DELETE", "/v1/volumes/" + _q(name))

    async def snapshots(self) -> List[SnapshotInfo]:
        d = await self._t.json("GET", "/v1/snapshots")
        return [SnapshotInfo.from_json(s) for s in d.get("items") or []]

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await self._t.request("DELETE", "/v1/snapshots/" + _q(snapshot_id))

    async def templates(self) -> List[TemplateInfo]:
        d = await self._t.json("GET", "/v1/templates")
        return [TemplateInfo.from_json(t) for t in d.get("items") or []]
