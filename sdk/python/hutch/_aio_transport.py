"""HTTP/1.1 over asyncio streams (the asyncio client, standard library only).

asyncio's streams give what the async client needs — backpressure on
writes (``drain``), reads as bytes arrive — so a small HTTP/1.1 codec over
them streams uploads, downloads and SSE without a third-party library.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import IO, Any, AsyncIterable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ._retry import NO_RETRY, RetryPolicy
from ._transport import Query, Transport, _idempotent, body_size
from .errors import HutchConnectionError, HutchError, make_error

AsyncBody = Union[bytes, IO[bytes], Iterable[bytes], AsyncIterable[bytes], None]

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncResponse:
    """An answer whose body is read as it arrives (Content-Length, chunked,
    or until the connection closes)."""

    def __init__(self, transport: AsyncTransport, conn: _Conn, status: int, reason: str,
                 headers: Dict[str, str], method: str, path: str) -> None:
        self._t = transport
        self._reader, self._writer = conn
        self._conn: Optional[_Conn] = conn
        self.status = status
        self.reason = reason
        #: Header names in lower case.
        self.headers = headers
        self.method = method
        self.path = path
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left: Optional[int] = int(cl) if cl is not None and cl.isdigit() and not self._chunked else None
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._left = 0
        self._chunk_left = 0
        self._eof = self._left == 0
        self._keep = headers.get("connection", "").lower() != "close" and (self._chunked or self._left is not None)
        self._buf = bytearray()

    async def _raw(self, n: int) -> bytes:
        """Up to ``n`` body bytes (``b""`` at the end)."""
        if self._eof:
            return b""
        try:
            if self._chunked:
                if self._chunk_left == 0:
                    size_line = await self._reader.readline()
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while (await self._reader.readline()) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        self._eof = True
                        return b""
                    self._chunk_left = size
                data = await self._reader.read(min(n, self._chunk_left))
                if not data:
                    raise ConnectionError("connection closed inside a chunk")
                self._chunk_left -= len(data)
                if self._chunk_left == 0:
                    await self._reader.readexactly(2)
                return data
            if self._left is not None:
                data = await self._reader.read(min(n, self._left))
                if not data:
                    raise ConnectionError("connection closed before the end of the body")
                self._left -= len(data)
                self._eof = self._left == 0
                return data
            data = await self._reader.read(n)
            if not data:
                self._eof = True
            return data
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            if self._conn is None:
                return b""
            raise HutchConnectionError(f"reading the answer: {e}", method=self.method, path=self.path) from e

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all the rest with ``n < 0``); ``b""`` at the end."""
        if n < 0:
            parts = [bytes(self._buf)]
            self._buf.clear()
            while True:
                chunk = await self._raw(1 << 20)
                if not chunk:
                    break
                parts.append(chunk)
            return b"".join(parts)
        if self._buf:
            out = bytes(self._buf[:n])
            del self._buf[:n]
            return out
        return await self._raw(n)

    async def readline(self, limit: int = 64 << 20) -> bytes:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0 or len(self._buf) >= limit:
                end = i + 1 if i >= 0 else limit
                out = bytes(self._buf[:end])
                del self._buf[:end]
                return out
            chunk = await self._raw(64 << 10)
            if not chunk:
                out = bytes(self._buf)
                self._buf.clear()
                return out
            self._buf += chunk

    async def json(self) -> Any:
        data = await self.read()
        await self.aclose()
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise HutchError(f"answer is not JSON: {e}", method=self.method, path=self.path) from e

    async def aclose(self) -> None:
        """Back to the pool when read to its end, else the connection is closed
        (which stops the server's work on it)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._eof and self._keep and not self._buf:
            self._t._release(conn)
        else:
            conn[1].transport.abort()

    def abort(self) -> None:
        """Closes the connection at once (synchronous; safe in ``finally`` of a cancelled task)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn[1].transport.abort()


class AsyncTransport:
    def __init__(self, url: Optional[str], api_key: Optional[str], *, retry: Optional[RetryPolicy],
                 timeout: Optional[float], user_agent: Optional[str] = None, max_idle: int = 8) -> None:
        # The sync transport parses the URL and the environment the same way.
        base = Transport(url, api_key, retry=retry, timeout=timeout, user_agent=user_agent)
        self.base_url, self.scheme, self.host, self.port = base.base_url, base.scheme, base.host, base.port
        self.api_key = base.api_key
        self.retry = retry or NO_RETRY
        self.timeout = timeout
        self._sync = base
        self._idle: List[_Conn] = []
        self._max_idle = max_idle

    def url(self, path: str, query: Optional[Query] = None) -> str:
        return self._sync.url(path, query)

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        return self._sync.headers(extra)

    async def _connect(self) -> _Conn:
        ctx = ssl.create_default_context() if self.scheme == "https" else None
        coro = asyncio.open_connection(self.host, self.port, ssl=ctx, limit=1 << 20)
        if self.timeout is not None:
            return await asyncio.wait_for(coro, self.timeout)
        return await coro

    def _release(self, conn: _Conn) -> None:
        if len(self._idle) < self._max_idle and not conn[1].is_closing():
            self._idle.append(conn)
        else:
            conn[1].transport.abort()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, w in idle:
            w.close()

    async def _send_body(self, w: asyncio.StreamWriter, body: Any, chunked: bool) -> None:
        async def put(chunk: bytes) -> None:
            if not chunk:
                return
            if chunked:
                w.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            else:
                w.write(chunk)
            await w.drain()  # backpressure: at most the socket's buffers in flight

        if hasattr(body, "read"):
            while True:
                chunk = body.read(1 << 20)
                if not chunk:
                    break
                await put(chunk)
        elif hasattr(body, "__aiter__"):
            async for chunk in body:
                await put(bytes(chunk))
        else:
            for chunk in body:
                await put(bytes(chunk))
        if chunked:
            w.write(b"0\r\n\r\n")
            await w.drain()

    async def _exchange(self, conn: _Conn, head: bytes, payload: Optional[bytes], streamed: Any,
                        chunked: bool) -> Tuple[int, str, Dict[str, str]]:
        r, w = conn
        w.write(head + (payload or b""))
        await w.drain()
        if streamed is not None:
            await self._send_body(w, streamed, chunked)
        while True:
            line = await r.readline()
            if not line:
                raise ConnectionResetError("connection closed before the answer")
            parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            status = int(parts[1])
            hdrs: Dict[str, str] = {}
            while True:
                h = await r.readline()
                if h in (b"\r\n", b"\n"):
                    break
                if not h:
                    raise ConnectionResetError("connection closed in the answer's header")
                k, _, v = h.decode("latin-1").partition(":")
                hdrs[k.strip().lower()] = v.strip()
            if status == 100:
                continue
            return status, parts[2] if len(parts) > 2 else "", hdrs

    async def request(self, method: str, path: str, *, query: Optional[Query] = None, json_body: Any = None,
                      body: AsyncBody = None, headers: Optional[Mapping[str, str]] = None, idempotent: bool = False,
                      idempotency_key: Optional[str] = None, stream: bool = False,
                      ok_statuses: Tuple[int, ...] = ()) -> AsyncResponse:
        hdrs = self.headers(headers)
        hdrs["Host"] = f"{self.host}:{self.port}"
        payload: Optional[bytes] = None
        if json_body is not None:
            payload = json.dumps(json_body, separators=(",", ":")).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            payload = bytes(body)
        replayable = payload is not None or body is None
        streamed = None if replayable else body
        chunked = False
        if payload is not None:
            hdrs["Content-Length"] = str(len(payload))
        elif streamed is not None:
            n = body_size(streamed) if not hasattr(streamed, "__aiter__") else None
            if n is not None:
                hdrs["Content-Length"] = str(n)
            else:
                hdrs["Transfer-Encoding"] = "chunked"
                chunked = True
        elif method in ("POST", "PUT", "PATCH"):
            hdrs["Content-Length"] = "0"
        if idempotency_key:
            hdrs["Idempotency-Key"] = idempotency_key
        head = (f"{method} {self.url(path, query)} HTTP/1.1\r\n" +
                "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n").encode()
        safe = _idempotent(method, idempotent, idempotency_key)
        attempt = 0
        stale = 0
        while True:
            attempt += 1
            reused = bool(self._idle) and not stream
            connected = reused
            conn: Optional[_Conn] = None
            try:
                conn = self._idle.pop() if reused else await self._connect()
                connected = True
                status, reason, rh = await self._exchange(conn, head, payload, streamed, chunked)
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError, asyncio.TimeoutError) as e:
                if conn is not None:
                    conn[1].transport.abort()
                gone = isinstance(e, (ConnectionError, asyncio.IncompleteReadError))
                if reused and replayable and stale < 2 and gone:
                    stale += 1
                    attempt -= 1
                    continue
                err = HutchConnectionError(f"{type(e).__name__}: {e}", method=method, path=path)
                if replayable and (safe or not connected) and attempt < self.retry.max_attempts:
                    await asyncio.sleep(self.retry.backoff(attempt))
                    continue
                raise err from e
            except BaseException:
                # Cancelled while waiting for the answer (a blocking exec):
                # closing the connection is what makes hutchd kill the command.
                if conn is not None:
                    conn[1].transport.abort()
                raise
            resp = AsyncResponse(self, conn, status, reason, rh, method, path)
            if 200 <= status < 300 or status in ok_statuses:
                if not stream:
                    data = await resp.read()
                    await resp.aclose()
                    return _BufferedAsync(resp, data)
                return resp
            raw = await resp.read(1 << 20)
            await resp.aclose()
            err2 = self._error(status, reason, rh, raw, method, path)
            if replayable and attempt < self.retry.max_attempts and Transport._should_retry(err2, safe):
                await asyncio.sleep(self.retry.backoff(attempt, err2.retry_after))
                continue
            raise err2

    @staticmethod
    def _error(status: int, reason: str, hdrs: Dict[str, str], raw: bytes, method: str, path: str) -> HutchError:
        body: Dict[str, Any] = {}
        try:
            parsed = json.loads(raw) if raw else None
            if isinstance(parsed, dict):
                body = parsed
        except ValueError:
            pass
        if not body.get("code"):
            body = {"message": raw.decode("utf-8", "replace").strip()[:200] or reason}
        ra = hdrs.get("retry-after")
        try:
            retry_after = float(ra) if ra else None
        except ValueError:
            retry_after = None
        return make_error(body, status=status, request_id=hdrs.get("x-request-id", ""), retry_after=retry_after,
                          method=method, path=path)

    async def json(self, method: str, path: str, **kw: Any) -> Any:
        return await (await self.request(method, path, **kw)).json()


class _BufferedAsync(AsyncResponse):
    def __init__(self, r: AsyncResponse, data: bytes) -> None:
        self.__dict__.update(r.__dict__)
        self._conn = None
        self._buf = bytearray(data)
        self._eof = True

    async def _raw(self, n: int) -> bytes:
        return b""
