"""HTTP/1.1 to hutchd with the standard library only (http.client).

Plain requests share a small pool of keep-alive connections; a streamed
answer (SSE, downloads) owns its connection until it is closed, so closing
it closes the socket, which hutchd turns into killing the command.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import threading
import time
import urllib.parse
from typing import IO, Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ._retry import NO_RETRY, RetryPolicy
from .errors import HutchConnectionError, HutchError, make_error

__version__ = "0.1.0"

Body = Union[bytes, IO[bytes], Iterable[bytes], None]
Query = Mapping[str, Union[str, int, bool, None]]

DEFAULT_URL = "http://127.0.0.1:8080"

# Connection failures that mean "nothing was sent" or "the idle keep-alive
# connection was closed by the server": safe to send again on a fresh one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, http.client.BadStatusLine)


def new_idempotency_key() -> str:
    """A random key for one logical create, the same on each of its retries."""
    return "idk_" + secrets.token_hex(16)


def _idempotent(method: str, idempotent: bool, idempotency_key: Optional[str]) -> bool:
    return method in ("GET", "HEAD", "PUT", "DELETE") or idempotent or bool(idempotency_key)


def _retry_after(resp: http.client.HTTPResponse) -> Optional[float]:
    v = resp.getheader("Retry-After")
    if not v:
        return None
    try:
        s = float(v)
    except ValueError:
        return None
    return s if s > 0 else None


def body_size(body: Body) -> Optional[int]:
    """Bytes left in ``body`` when known (bytes, a regular file), else ``None``."""
    if body is None:
        return 0
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    fileno = getattr(body, "fileno", None)
    tell = getattr(body, "tell", None)
    if fileno is not None and tell is not None:
        try:
            st = os.fstat(fileno())
            pos = int(tell())
        except (OSError, ValueError):
            return None
        import stat

        if stat.S_ISREG(st.st_mode) and pos <= st.st_size:
            return st.st_size - pos
    return None


class Response:
    """A 2xx answer whose body is read as it arrives."""

    def __init__(self, transport: Transport, conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, method: str, path: str) -> None:
        self._transport = transport
        self._conn: Optional[http.client.HTTPConnection] = conn
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self.method = method
        self.path = path

    @property
    def raw(self) -> http.client.HTTPResponse:
        return self._resp

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(None if n < 0 else n)
        except (OSError, http.client.HTTPException) as e:
            if self._conn is None:
                return b""  # closed by close()/abort() from elsewhere
            raise HutchConnectionError(f"reading the answer: {e}", method=self.method, path=self.path) from e

    def readline(self, limit: int = -1) -> bytes:
        try:
            return self._resp.readline(limit)
        except (OSError, http.client.HTTPException, ValueError) as e:
            if self._conn is None:
                return b""
            raise HutchConnectionError(f"reading the answer: {e}", method=self.method, path=self.path) from e

    def json(self) -> Any:
        data = self.read()
        self.close()
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise HutchError(f"answer is not JSON: {e}", method=self.method, path=self.path) from e

    def close(self) -> None:
        """Releases the connection: back to the pool when the answer was read
        to its end, else closed (which stops the server's work on it)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close:
            self._transport._release(conn)
        else:
            self._resp.close()
            conn.close()

    def abort(self) -> None:
        """Closes the socket at once, also while another thread blocks reading it."""
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transport:
    """Sends requests to one hutchd, with the client's retry policy."""

    def __init__(self, url: Optional[str], api_key: Optional[str], *, retry: Optional[RetryPolicy],
                 timeout: Optional[float], user_agent: Optional[str] = None, max_idle: int = 8) -> None:
        url = url or os.environ.get("HUTCH_URL") or DEFAULT_URL
        if "://" not in url:
            url = "http://" + url
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"hutch: bad URL {url!r}: want http(s)://host[:port]")
        self.base_url = f"{u.scheme}://{u.netloc}{u.path.rstrip('/')}"
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.netloc = u.netloc
        self.prefix = u.path.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("HUTCH_API_KEY", "")
        self.api_key = key
        self.retry = retry or NO_RETRY
        self.timeout = timeout
        self.user_agent = user_agent or f"hutch-python/{__version__}"
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    # -- connections -------------------------------------------------------

    def _new_conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout, blocksize=64 << 10)

    def _get_conn(self, fresh: bool, timeout: Optional[float]) -> Tuple[http.client.HTTPConnection, bool]:
        if not fresh:
            with self._lock:
                while self._idle:
                    conn = self._idle.pop()
                    if conn.sock is not None:
                        conn.timeout = timeout
                        conn.sock.settimeout(timeout)
                        return conn, True
        return self._new_conn(timeout), False

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle and conn.sock is not None:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # -- requests ----------------------------------------------------------

    def url(self, path: str, query: Optional[Query] = None) -> str:
        return self.prefix + path + self._query(query)

    @staticmethod
    def _query(query: Optional[Query]) -> str:
        if not query:
            return ""
        items = []
        for k, v in query.items():
            if v is None:
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            items.append((k, str(v)))
        return "?" + urllib.parse.urlencode(items, quote_via=urllib.parse.quote) if items else ""

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"User-Agent": self.user_agent}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        if extra:
            h.update(extra)
        return h

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Query] = None,
        json_body: Any = None,
        body: Body = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotent: bool = False,
        idempotency_key: Optional[str] = None,
        stream: bool = False,
        timeout: Optional[float] = None,
        ok_statuses: Tuple[int, ...] = (),
    ) -> Response:
        """Sends one logical request (resent per the retry policy) and returns
        its 2xx answer; any other status raises the typed :class:`HutchError`."""
        hdrs = self.headers(headers)
        payload: Optional[bytes] = None
        if json_body is not None:
            payload = json.dumps(json_body, separators=(",", ":")).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            payload = bytes(body)
        replayable = payload is not None or body is None
        streamed_body = None if replayable else body
        if payload is not None:
            hdrs["Content-Length"] = str(len(payload))
        elif streamed_body is not None:
            n = body_size(streamed_body)
            if n is not None:
                hdrs["Content-Length"] = str(n)
            else:
                hdrs["Transfer-Encoding"] = "chunked"
        elif method in ("POST", "PUT", "PATCH"):
            hdrs["Content-Length"] = "0"
        if idempotency_key:
            hdrs["Idempotency-Key"] = idempotency_key
        safe = _idempotent(method, idempotent, idempotency_key)
        target = self.url(path, query)
        to = timeout if timeout is not None else self.timeout
        attempt = 0
        stale_retries = 0
        while True:
            attempt += 1
            conn, reused = self._get_conn(fresh=stream, timeout=to)
            connected = reused
            try:
                if not reused:
                    conn.connect()
                    connected = True
                send_body: Any = payload if payload is not None else streamed_body
                conn.request(method, target, body=send_body, headers=hdrs,
                             encode_chunked="Transfer-Encoding" in hdrs)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if reused and replayable and isinstance(e, _STALE) and stale_retries < 2:
                    stale_retries += 1  # the server had closed the idle connection
                    attempt -= 1
                    continue
                cerr = HutchConnectionError(f"{type(e).__name__}: {e}", method=method, path=path)
                can = replayable and (safe or not connected)
                if can and attempt < self.retry.max_attempts:
                    time.sleep(self.retry.backoff(attempt))
                    continue
                raise cerr from e
            except BaseException:
                # Interrupted while waiting for the answer (KeyboardInterrupt
                # during a blocking exec): closing the connection is what
                # makes hutchd kill the command.
                conn.close()
                raise
            if 200 <= resp.status < 300 or resp.status in ok_statuses:
                r = Response(self, conn, resp, method, path)
                if not stream:
                    # Read it all now so the connection goes back to the pool.
                    data = r.read()
                    r.close()
                    return _Buffered(r, data)
                return r
            err = self._error(resp, method, path)
            # An error answer's body was read whole: the connection is reusable.
            if resp.will_close:
                conn.close()
            else:
                self._release(conn)
            if replayable and attempt < self.retry.max_attempts and self._should_retry(err, safe):
                time.sleep(self.retry.backoff(attempt, err.retry_after))
                continue
            raise err

    @staticmethod
    def _should_retry(err: HutchError, safe: bool) -> bool:
        if not err.retryable:
            return False
        if err.code in ("internal", "agent_timeout") or err.status in (500, 504):
            return safe
        return True

    @staticmethod
    def _error(resp: http.client.HTTPResponse, method: str, path: str) -> HutchError:
        try:
            raw = resp.read(1 << 20)
        except (OSError, http.client.HTTPException):
            raw = b""
        rid = resp.getheader("X-Request-Id") or ""
        body: Dict[str, Any] = {}
        try:
            parsed = json.loads(raw) if raw else None
            if isinstance(parsed, dict):
                body = parsed
        except ValueError:
            pass
        if not body.get("code"):
            msg = raw.decode("utf-8", "replace").strip()
            body = {"message": msg[:200] or resp.reason}
        return make_error(body, status=resp.status, request_id=rid, retry_after=_retry_after(resp),
                          method=method, path=path)

    def json(self, method: str, path: str, **kw: Any) -> Any:
        """Sends the request and decodes its JSON answer (``None`` for an empty body)."""
        return self.request(method, path, **kw).json()


class _Buffered(Response):
    """An answer read whole (its connection already released)."""

    def __init__(self, r: Response, data: bytes) -> None:
        self.__dict__.update(r.__dict__)
        self._conn = None
        self._data = data
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            out, self._pos = self._data[self._pos:], len(self._data)
        else:
            out = self._data[self._pos:self._pos + n]
            self._pos += len(out)
        return out

    def readline(self, limit: int = -1) -> bytes:
        end = self._data.find(b"\n", self._pos)
        end = len(self._data) if end < 0 else end + 1
        if limit >= 0:
            end = min(end, self._pos + limit)
        out, self._pos = self._data[self._pos:end], end
        return out

    def close(self) -> None:
        pass
