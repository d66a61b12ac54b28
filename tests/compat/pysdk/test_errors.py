"""Typed errors (bad key, unknown id, capacity, bad request) and the opt-in
retry policy: Retry-After honoured, and a retried create that makes exactly
one sandbox."""

from __future__ import annotations

import json
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar, Iterator, List, Tuple

import pytest

import hutch
import hutch._transport
from conftest import Server, start_server, stop_server


def test_bad_key(server: Server) -> None:
    c = hutch.Client(server.url, "hk_wrong")
    with pytest.raises(hutch.UnauthorizedError) as e:
        list(c.list())
    err = e.value
    assert (err.status, err.code, err.retryable) == (401, "unauthorized", False)
    assert err.request_id.startswith("r_") and isinstance(err, hutch.HutchError)


def test_unknown_ids(client: hutch.Client) -> None:
    with pytest.raises(hutch.SandboxNotFoundError) as e:
        client.connect("sb_doesnotexist")
    assert (e.value.status, e.value.code, e.value.retryable) == (404, "sandbox_not_found", False)
    assert isinstance(e.value, hutch.NotFoundError) and e.value.request_id
    with pytest.raises(hutch.SandboxNotFoundError):
        client.sandbox("sb_doesnotexist").exec("true")
    with pytest.raises(hutch.TemplateNotFoundError):
        client.create(template="no-such-template")


def test_invalid_request(client: hutch.Client) -> None:
    with pytest.raises(hutch.InvalidRequestError) as e:
        client.create(ttl_seconds=-1)
    assert e.value.status == 400 and e.value.message


def test_a_stopped_sandbox(client: hutch.Client) -> None:
    sb = client.create(ttl_seconds=60)
    sb.delete()
    sb.delete()  # idempotent
    with pytest.raises(hutch.SandboxNotRunningError) as e:
        sb.exec("true")
    assert isinstance(e.value, hutch.ConflictError)


@pytest.fixture(scope="module")
def small(tmp_root: Path) -> Iterator[Server]:
    """A hutchd that holds two sandboxes at most."""
    s = start_server(tmp_root, "small", ["--max-sandboxes", "2", "--no-network"])
    yield s
    stop_server(s)


def test_capacity(small: Server) -> None:
    c = small.client()
    made = [c.create(ttl_seconds=120) for _ in range(2)]
    try:
        with pytest.raises(hutch.CapacityExhaustedError) as e:
            c.create(ttl_seconds=120)
        err = e.value
        assert (err.status, err.code, err.retryable) == (503, "capacity_exhausted", True)
        # A retrying client tries again (a place may free up), then gives up the same way.
        r = small.client(retry=hutch.RetryPolicy(max_attempts=2, initial_backoff=0.01))
        with pytest.raises(hutch.CapacityExhaustedError):
            r.create(ttl_seconds=120)
        assert len(list(c.list(status="running"))) == 2
    finally:
        for sb in made:
            sb.delete()


class LossyProxy:
    """Relays TCP to hutchd, but drops the answer of the first sandbox create:
    the create happened, its client never hears of it (a lost response)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.creates = 0
        self.dropped = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        u = socket.create_connection(self.upstream)
        drop = threading.Event()

        def up() -> None:
            try:
                while True:
                    data = c.recv(65536)
                    if not data:
                        break
                    if b"POST /v1/sandboxes HTTP/1.1" in data:
                        with self.lock:
                            self.creates += 1
                            if self.dropped == 0:
                                self.dropped = 1
                                drop.set()
                    u.sendall(data)
                u.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the other direction closed both sockets

        threading.Thread(target=up, daemon=True).start()
        try:
            while True:
                data = u.recv(65536)
                if not data:
                    break
                if drop.is_set():
                    break  # the answer is lost on the way back
                c.sendall(data)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.sock.close()


def test_a_retried_create_makes_exactly_one_sandbox(server: Server) -> None:
    tag = secrets.token_hex(4)
    direct = server.client()
    proxy = LossyProxy(server.url)
    try:
        c = hutch.Client(proxy.url, server.key, retry=hutch.RetryPolicy(initial_backoff=0.01))
        sb = c.create(ttl_seconds=120, metadata={"retry": tag})
        assert proxy.creates == 2  # the lost one and its retry, with the same Idempotency-Key
        assert [x.id for x in direct.list(metadata={"retry": tag})] == [sb.id]
        sb.delete()

        # Without the retry policy the lost answer is a connection error.
        tag2 = secrets.token_hex(4)
        proxy.dropped = 0
        with pytest.raises(hutch.HutchConnectionError) as e:
            hutch.Client(proxy.url, server.key).create(ttl_seconds=120, metadata={"retry": tag2})
        assert e.value.retryable
        for x in direct.list(metadata={"retry": tag2}):
            x.delete()
    finally:
        proxy.close()


class FakeHutch(BaseHTTPRequestHandler):
    """Answers 429 with Retry-After to the first create, then the sandbox."""

    calls: ClassVar[List[Tuple[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        FakeHutch.calls.append((self.path, self.headers.get("Idempotency-Key", "")))
        if len(FakeHutch.calls) == 1:
            body = json.dumps({"code": "rate_limited", "message": "slow down", "request_id": "r_1",
                               "retryable": True}).encode()
            self.send_response(429)
            self.send_header("Retry-After", "3")
        else:
            body = json.dumps({"id": "sb_fake", "status": "running"}).encode()
            self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_retry_after_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeHutch)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    waits: List[float] = []
    monkeypatch.setattr(hutch._transport.time, "sleep", waits.append)
    try:
        FakeHutch.calls = []
        with pytest.raises(hutch.RateLimitedError) as e:  # retries are opt-in
            hutch.Client(url, "k").create()
        assert e.value.retry_after == 3 and e.value.retryable and waits == []

        FakeHutch.calls = []
        sb = hutch.Client(url, "k", retry=hutch.RetryPolicy(initial_backoff=0.01)).create()
        assert sb.id == "sb_fake"
        assert len(FakeHutch.calls) == 2 and waits and waits[0] >= 3
        assert FakeHutch.calls[0][1] == FakeHutch.calls[1][1] != ""
    finally:
        srv.shutdown()
