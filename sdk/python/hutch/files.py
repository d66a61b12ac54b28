"""Files of a sandbox or a volume: read and write bytes, text and streams of
any size, list, stat, mkdir, move, remove."""

from __future__ import annotations

import io
import os
from typing import IO, Any, Dict, Iterable, List, Optional, Union

from ._transport import Response, Transport
from .errors import FileNotFoundInSandboxError
from .models import EntryInfo, WriteInfo

__all__ = ["Files", "FileReader"]

Data = Union[bytes, bytearray, memoryview, str, IO[bytes], Iterable[bytes]]

CHUNK = 1 << 20


class FileReader(io.RawIOBase):
    """A download being read as it arrives (a binary file object).

    Close it (or use ``with``) to end the transfer early.
    """

    def __init__(self, resp: Response) -> None:
        super().__init__()
        self._resp = resp
        #: The ``Content-Range`` header of a ranged read, else ``None``.
        self.content_range: Optional[str] = resp.headers.get("Content-Range")
        length = resp.headers.get("Content-Length")
        #: The bytes this answer holds, when the server said.
        self.length: Optional[int] = int(length) if length and length.isdigit() else None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._resp.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        return self._resp.read(-1 if size is None else size)

    def close(self) -> None:
        if not self.closed:
            self._resp.close()
        super().close()

    def iter_chunks(self, size: int = CHUNK) -> Iterable[bytes]:
        """The rest of the file in chunks of at most ``size`` bytes."""
        while True:
            chunk = self._resp.read(size)
            if not chunk:
                return
            yield chunk


class Files:
    """File operations under one ``…/fs`` route (``Sandbox.files``, ``Volume.files``).

    Paths resolve inside the sandbox's own root (relative ones from the
    user's home) or the volume's root. ``user`` (sandboxes only) performs the
    operation as that user: permission checks and the owner of new files.
    """

    def __init__(self, transport: Transport, base: str) -> None:
        self._t = transport
        self._base = base

    def _q(self, path: str, user: Optional[str], **extra: Any) -> Dict[str, Any]:
        q: Dict[str, Any] = {"path": path}
        if user:
            q["user"] = user
        q.update({k: v for k, v in extra.items() if v is not None})
        return q

    # -- write -------------------------------------------------------------

    def write(self, path: str, data: Data, *, mode: Optional[int] = None, user: Optional[str] = None) -> WriteInfo:
        """Writes ``data`` to ``path``, atomically (a temp file renamed into
        place), creating parent directories.

        ``data`` is bytes, text (UTF-8), a binary file object (streamed; its
        size is sent when it is a regular file) or an iterable of bytes
        (streamed with chunked encoding). Bytes and text are resent by the
        retry policy; streams are not.
        """
        body: Any
        if isinstance(data, str):
            body = data.encode()
        elif isinstance(data, (bytearray, memoryview)):
            body = bytes(data)
        else:
            body = data
        q = self._q(path, user, mode=f"{mode:04o}" if mode is not None else None)
        d = self._t.json("PUT", self._base, query=q, body=body,
                         headers={"Content-Type": "application/octet-stream"})
        return WriteInfo(str(d.get("path", path)), int(d.get("size", 0)))

    def write_text(self, path: str, text: str, *, mode: Optional[int] = None, user: Optional[str] = None) -> WriteInfo:
        return self.write(path, text.encode(), mode=mode, user=user)

    def upload(self, path: str, local_path: Union[str, os.PathLike[str]], *, mode: Optional[int] = None,
               user: Optional[str] = None) -> WriteInfo:
        """Streams the local file ``local_path`` to ``path`` (bounded memory)."""
        with open(local_path, "rb") as f:
            return self.write(path, f, mode=mode, user=user)

    # -- read --------------------------------------------------------------

    def open(self, path: str, *, offset: int = 0, length: Optional[int] = None,
             user: Optional[str] = None) -> FileReader:
        """Opens ``path`` for reading as it streams in; ``offset``/``length``
        ask for a byte range (``RangeNotSatisfiableError`` past the end)."""
        headers: Dict[str, str] = {}
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if offset or length is not None:
            end = "" if length is None else str(offset + length - 1)
            headers["Range"] = f"bytes={offset}-{end}"
        resp = self._t.request("GET", self._base, query=self._q(path, user), headers=headers, stream=True)
        return FileReader(resp)

    def read(self, path: str, *, offset: int = 0, length: Optional[int] = None, user: Optional[str] = None) -> bytes:
        """The whole file (or a range of it) as bytes."""
        if length == 0:
            return b""
        with self.open(path, offset=offset, length=length, user=user) as f:
            return f.read()

    def read_text(self, path: str, *, user: Optional[str] = None, encoding: str = "utf-8") -> str:
        return self.read(path, user=user).decode(encoding)

    def download(self, path: str, local_path: Union[str, os.PathLike[str]], *, user: Optional[str] = None) -> int:
        """Streams ``path`` into the local file ``local_path``; returns its size."""
        n = 0
        with self.open(path, user=user) as src, open(local_path, "wb") as dst:
            for chunk in src.iter_chunks():
                dst.write(chunk)
                n += len(chunk)
        return n

    # -- the rest ----------------------------------------------------------

    def list(self, path: str, *, depth: int = 1, user: Optional[str] = None) -> List[EntryInfo]:
        """The entries under ``path``, ``depth`` levels deep (1-32); links are not followed."""
        d = self._t.json("GET", self._base + "/list", query=self._q(path, user, depth=depth))
        return [EntryInfo.from_json(e) for e in d.get("entries") or []]

    def stat(self, path: str, *, user: Optional[str] = None) -> EntryInfo:
        return EntryInfo.from_json(self._t.json("GET", self._base + "/stat", query=self._q(path, user)))

    def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            self.stat(path, user=user)
        except FileNotFoundInSandboxError:
            return False
        return True

    def mkdir(self, path: str, *, user: Optional[str] = None) -> EntryInfo:
        """Creates ``path`` and its parents (an existing directory is fine)."""
        body: Dict[str, str] = {"path": path}
        if user:
            body["user"] = user
        return EntryInfo.from_json(self._t.json("POST", self._base + "/mkdir", json_body=body, idempotent=True))

    def move(self, src: str, dst: str, *, user: Optional[str] = None) -> EntryInfo:
        """Renames ``src`` to ``dst``, replacing ``dst``."""
        body: Dict[str, str] = {"from": src, "to": dst}
        if user:
            body["user"] = user
        return EntryInfo.from_json(self._t.json("POST", self._base + "/move", json_body=body))

    def remove(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        """Deletes a file or directory (a non-empty one needs ``recursive``)."""
        self._t.request("DELETE", self._base, query=self._q(path, user, recursive=True if recursive else None))
