"""A JavaScript or TypeScript context's engine: one Node.js process we host.

node_driver.js keeps the state (every run is a script in its one global
context) and speaks JSON lines over two socket pairs (requests in,
replies out); this side sends a run
and forwards what comes back until the run's "done". The driver's own
fds 1 and 2 are pipes too: child processes the user's code starts write
there, and that output goes to the run in progress.

Node runs in its own session, so an interrupt (SIGINT to the group)
reaches the foreground child processes as well as the script.
"""

import asyncio
import codecs
import json
import os
import shutil
import signal
import socket
from typing import Dict, Optional

import output_lines
from engine import Emit, Engine, EngineDied, kill_group, signal_group

_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_driver.js")
_LINE_LIMIT = 256 << 20  # one output line of the driver may carry a large result


def node_binary() -> Optional[str]:
    return shutil.which("node") or shutil.which("nodejs")


class NodeEngine(Engine):
    def __init__(self, cwd: str, language: str):
        self.language = language
        self._cwd = cwd
        self._proc = None
        self._writer = None
        self._reply_writer = None
        self._tasks = []
        self._next_id = 0
        self._run = None  # {"id", "emit", "done"} of the run in progress
        self._count = 0
        self._dead = False

    async def start(self) -> None:
        node = node_binary()
        if node is None:
            raise EngineDied("Node.js is not installed")
        req_ours, req_theirs = socket.socketpair()
        rep_ours, rep_theirs = socket.socketpair()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                node, _DRIVER, str(req_theirs.fileno()), str(rep_theirs.fileno()),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self._cwd,
                pass_fds=(req_theirs.fileno(), rep_theirs.fileno()), start_new_session=True)
        finally:
            req_theirs.close()
            rep_theirs.close()
        _, self._writer = await asyncio.open_unix_connection(sock=req_ours)
        reader, self._reply_writer = await asyncio.open_unix_connection(sock=rep_ours,
                                                                        limit=_LINE_LIMIT)
        first = await asyncio.wait_for(reader.readline(), 30)
        if not first:
            self._dead = True
            err = await self._proc.stderr.read(4096)
            raise EngineDied("the Node.js driver did not start: " + err.decode(errors="replace"))
        self._tasks = [asyncio.create_task(self._read_channel(reader)),
                       asyncio.create_task(self._read_pipe(self._proc.stdout, "stdout")),
                       asyncio.create_task(self._read_pipe(self._proc.stderr, "stderr"))]

    async def _read_channel(self, reader):
        while True:
            line = await reader.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            run = self._run
            if run is None or msg.get("id") != run["id"]:
                continue
            kind = msg.get("type")
            if kind in ("stdout", "stderr"):
                run["emit"](output_lines.stream(kind, msg.get("text", "")))
            elif kind == "result":
                run["emit"](output_lines.text_result(msg.get("text", "")))
            elif kind == "error":
                run["emit"](output_lines.error(msg.get("name", "Error"), msg.get("value", ""),
                                               msg.get("traceback", "")))
            elif kind == "done" and not run["done"].done():
                run["done"].set_result(None)
        self._dead = True
        run = self._run
        if run is not None and not run["done"].done():
            code = await self._proc.wait()
            run["done"].set_exception(EngineDied(f"the Node.js process exited (status {code})"))

    async def _read_pipe(self, pipe, name):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = await pipe.read(65536)
            if not chunk:
                return
            text = decoder.decode(chunk)
            if text and self._run is not None:
                self._run["emit"](output_lines.stream(name, text))

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and not self._dead

    async def run(self, code: str, env_vars: Optional[Dict[str, str]], emit: Emit) -> None:
        if not self.alive():
            raise EngineDied("the Node.js process is not running")
        self._count += 1
        self._next_id += 1
        emit(output_lines.execution_count(self._count))
        done = asyncio.get_running_loop().create_future()
        self._run = {"id": self._next_id, "emit": emit, "done": done}
        try:
            req = {"id": self._next_id, "code": code, "language": self.language,
                   "env": env_vars or {}}
            self._writer.write(json.dumps(req).encode() + b"\n")
            await done
        finally:
            self._run = None

    async def interrupt(self) -> None:
        if self.alive():
            signal_group(self._proc, signal.SIGINT)

    async def shutdown(self) -> None:
        self._dead = True
        run = self._run
        if run is not None and not run["done"].done():
            run["done"].set_exception(EngineDied("the Node.js process was stopped"))
        await kill_group(self._proc)
        for t in self._tasks:
            t.cancel()
        for w in (self._writer, self._reply_writer):
            if w is not None:
                w.close()
        self._writer = self._reply_writer = None
