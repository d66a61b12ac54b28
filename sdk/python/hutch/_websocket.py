"""A minimal RFC 6455 WebSocket client over a socket (the PTY route).

The standard library has no WebSocket client, and the sync SDK takes no
dependency: this is the part of the protocol hutchd's terminal uses —
client-masked frames, binary and text messages, fragmentation, ping/pong,
close — and nothing else (no extensions, no subprotocols).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import threading
from typing import Dict, Optional, Tuple

from .errors import HutchConnectionError, HutchError, make_error

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 64 << 20


class WebSocketClosedError(Exception):
    """The peer closed the connection (``code`` from its close frame, or 1006)."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"websocket closed: {code} {reason}".strip())
        self.code = code
        self.reason = reason


class WebSocket:
    def __init__(self, sock: socket.socket, buffered: bytes) -> None:
        self._sock = sock
        self._buf = bytearray(buffered)
        self._send_lock = threading.Lock()
        self.closed = False
        self.close_code: Optional[int] = None

    @classmethod
    def connect(cls, scheme: str, host: str, port: int, target: str, headers: Dict[str, str],
                timeout: Optional[float]) -> WebSocket:
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            if scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        except OSError as e:
            raise HutchConnectionError(f"connecting: {e}", method="GET", path=target) from e
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            status, hdrs, rest, body = _read_http_head(sock)
        except OSError as e:
            sock.close()
            raise HutchConnectionError(f"websocket handshake: {e}", method="GET", path=target) from e
        if status != 101:
            sock.close()
            import json

            try:
                parsed = json.loads(body) if body else {}
            except ValueError:
                parsed = {}
            if not isinstance(parsed, dict) or not parsed.get("code"):
                parsed = {"message": body.decode("utf-8", "replace")[:200]}
            raise make_error(parsed, status=status, request_id=hdrs.get("x-request-id", ""),
                             method="GET", path=target)
        want = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            sock.close()
            raise HutchError("websocket handshake: bad Sec-WebSocket-Accept", method="GET", path=target)
        sock.settimeout(None)
        return cls(sock, rest)

    # -- sending -----------------------------------------------------------

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytearray([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head.append(0x80 | n)
        elif n < 1 << 16:
            head.append(0x80 | 126)
            head += struct.pack("!H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack("!Q", n)
        mask = os.urandom(4)
        head += mask
        masked = _mask(payload, mask)
        with self._send_lock:
            try:
                self._sock.sendall(bytes(head) + masked)
            except OSError as e:
                raise WebSocketClosedError(1006, str(e)) from e

    def send_binary(self, data: bytes) -> None:
        self._send_frame(OP_BINARY, data)

    def send_text(self, text: str) -> None:
        self._send_frame(OP_TEXT, text.encode())

    # -- receiving ---------------------------------------------------------

    def _fill(self, n: int) -> None:
        while len(self._buf) < n:
            try:
                chunk = self._sock.recv(max(65536, n - len(self._buf)))
            except OSError as e:
                raise WebSocketClosedError(1006, str(e)) from e
            if not chunk:
                raise WebSocketClosedError(1006, "connection closed")
            self._buf += chunk

    def _take(self, n: int) -> bytes:
        self._fill(n)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _read_frame(self) -> Tuple[bool, int, bytes]:
        b0, b1 = self._take(2)
        fin, opcode, masked, n = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._take(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._take(8))
        if n > MAX_MESSAGE:
            raise WebSocketClosedError(1009, "frame too large")
        mask = self._take(4) if masked else b""
        payload = self._take(n)
        if masked:
            payload = _mask(payload, mask)
        return fin, opcode, payload

    def recv(self) -> Tuple[int, bytes]:
        """The next data message as (``OP_TEXT``/``OP_BINARY``, payload);
        answers pings; raises :class:`WebSocketClosedError` at the close."""
        parts: list[bytes] = []
        msg_op = 0
        while True:
            fin, op, payload = self._read_frame()
            if op == OP_PING:
                self._send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                self.close_code = code
                if not self.closed:
                    try:
                        self._send_frame(OP_CLOSE, payload[:2])
                    except WebSocketClosedError:
                        pass
                self._shutdown()
                raise WebSocketClosedError(code, payload[2:].decode("utf-8", "replace"))
            if op != OP_CONT:
                msg_op = op
            parts.append(payload)
            if fin:
                return msg_op, b"".join(parts)

    def close(self, code: int = 1000) -> None:
        """Sends a close frame and closes the socket (the terminal is hung up)."""
        if self.closed:
            return
        try:
            self._send_frame(OP_CLOSE, struct.pack("!H", code))
        except WebSocketClosedError:
            pass
        self._shutdown()

    def _shutdown(self) -> None:
        self.closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()


def _mask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    # XOR with the repeated 4-byte key, as one big integer (fast in CPython).
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


def _read_http_head(sock: socket.socket) -> Tuple[int, Dict[str, str], bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise OSError("connection closed during the handshake")
        buf += chunk
        if len(buf) > 1 << 20:
            raise OSError("handshake answer too long")
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    hdrs: Dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    body = b""
    if status != 101:
        n = int(hdrs.get("content-length", "0") or 0)
        body = rest
        sock.settimeout(5)
        while len(body) < n:
            chunk = sock.recv(n - len(body))
            if not chunk:
                break
            body += chunk
        rest = b""
    return status, hdrs, rest, body
