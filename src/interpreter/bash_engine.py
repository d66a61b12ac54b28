"""A bash context's engine: one long-lived bash whose variables and cwd persist.

Each run's code goes to a file the shell `source`s (so `cd`, variables
and functions stay in the shell, and the code's stdin is /dev/null, not
the pipe the shell reads its commands from). After it the shell prints a
marker with a per-run random token on stdout (with the exit status) and
on stderr; everything before the markers is the run's output, streamed
as it comes. A run ends when both markers are read.

The shell runs in its own session: an interrupt is SIGINT to the whole
process group (the foreground command dies as at a terminal), and the
shell's INT trap returns from the sourced code instead of exiting, so
the shell and its state survive.
"""

import asyncio
import codecs
import os
import re
import secrets
import shlex
import shutil
import signal
import tempfile
from typing import Dict, Optional

import output_lines
from engine import Emit, Engine, EngineDied, kill_group, signal_group

_RS = "\x1e"  # ASCII record separator: frames the markers, rare in real output
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SETUP = (
    # Interrupted: leave the sourced code (status 130), keep the shell.
    "trap 'return 130 2>/dev/null' INT\n"
)


def _env_set(env: Dict[str, str]) -> str:
    # Names bash cannot hold as variables are skipped.
    parts = []
    for k, v in env.items():
        if not _NAME.match(k):
            continue
        parts.append(f'if [ -n "${{{k}+x}}" ]; then __hutch_old_{k}="${k}"; __hutch_had_{k}=1; '
                     f"else __hutch_had_{k}=0; fi; export {k}={shlex.quote(v)}")
    return "; ".join(parts)


def _env_restore(env: Dict[str, str]) -> str:
    parts = []
    for k in env:
        if not _NAME.match(k):
            continue
        parts.append(f'if [ "$__hutch_had_{k}" = 1 ]; then export {k}="$__hutch_old_{k}"; '
                     f"else unset {k}; fi; unset __hutch_old_{k} __hutch_had_{k}")
    return "; ".join(parts)


class _MarkedStream:
    """Reads one of the shell's pipes, splitting output from the run's end marker."""

    def __init__(self, reader: asyncio.StreamReader, name: str, engine: "BashEngine"):
        self._reader, self._name, self._engine = reader, name, engine
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""

    async def pump(self):
        while True:
            chunk = await self._reader.read(65536)
            if not chunk:
                self._engine._stream_ended()
                return
            self._buf += self._decoder.decode(chunk)
            self._scan()

    def _scan(self):
        run = self._engine._run_state
        if run is None:  # output of background jobs between runs: nobody to give it to
            self._buf = ""
            return
        marker = _RS + run["token"]
        i = self._buf.find(marker)
        if i >= 0:
            end = self._buf.find(_RS, i + len(marker))
            if end < 0:  # the marker's tail has not arrived yet
                self._emit(self._buf[:i])
                self._buf = self._buf[i:]
                return
            self._emit(self._buf[:i])
            trailer = self._buf[i + len(marker):end]
            self._buf = self._buf[end + 1:]
            run[self._name] = trailer
            self._engine._maybe_done()
            return
        # Keep back a tail that may be the start of the marker.
        hold = self._buf.rfind(_RS)
        if hold < 0 or len(self._buf) - hold > len(marker):
            hold = len(self._buf)
        self._emit(self._buf[:hold])
        self._buf = self._buf[hold:]

    def _emit(self, text):
        run = self._engine._run_state
        if text and run is not None:
            run["emit"](output_lines.stream(self._name, text))


class BashEngine(Engine):
    language = "bash"

    def __init__(self, cwd: str):
        self._cwd = cwd
        self._proc = None
        self._tmp = None
        self._run_state = None
        self._pumps = []
        self._count = 0
        self._dead = False

    async def start(self) -> None:
        bash = shutil.which("bash") or "/bin/bash"
        self._tmp = tempfile.mkdtemp(prefix="hutch-bash-")
        self._proc = await asyncio.create_subprocess_exec(
            bash, "--noprofile", "--norc", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=self._cwd,
            start_new_session=True, limit=1 << 20)
        self._proc.stdin.write(_SETUP.encode())
        self._pumps = [asyncio.create_task(_MarkedStream(self._proc.stdout, "stdout", self).pump()),
                       asyncio.create_task(_MarkedStream(self._proc.stderr, "stderr", self).pump())]

    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and not self._dead

    def _stream_ended(self):
        self._dead = True
        run = self._run_state
        if run is not None and not run["done"].done():
            run["done"].set_exception(EngineDied("bash exited"))

    def _maybe_done(self):
        run = self._run_state
        if "stdout" in run and "stderr" in run and not run["done"].done():
            run["done"].set_result(run["stdout"])

    async def run(self, code: str, env_vars: Optional[Dict[str, str]], emit: Emit) -> None:
        if not self.alive():
            raise EngineDied("bash is not running")
        self._count += 1
        emit(output_lines.execution_count(self._count))
        token = secrets.token_hex(8)
        path = os.path.join(self._tmp, "run.sh")
        with open(path, "w") as f:
            f.write(code)
            f.write("\n")
        env = env_vars or {}
        lines = []
        if _env_set(env):
            lines.append(_env_set(env))
        lines.append(f"source {shlex.quote(path)} </dev/null")
        # The stdout marker carries "token:status"; the stderr one just the token.
        lines.append(f"__hutch_rc=$?; printf '{_RS}%s{_RS}' \"{token}:$__hutch_rc\"; "
                     f"printf '{_RS}%s{_RS}' '{token}' >&2")
        if _env_restore(env):
            lines.append(_env_restore(env))
        done = asyncio.get_running_loop().create_future()
        self._run_state = {"token": token, "emit": emit, "done": done}
        try:
            self._proc.stdin.write(("\n".join(lines) + "\n").encode())
            trailer = await done  # ":<status>", what follows the token on stdout
        finally:
            self._run_state = None
        status = int(trailer[1:]) if trailer[1:].isdigit() else 0
        if status != 0:
            emit(output_lines.error("ExitError", f"exit status {status}", ""))

    async def interrupt(self) -> None:
        if self.alive():
            signal_group(self._proc, signal.SIGINT)

    async def shutdown(self) -> None:
        self._dead = True
        run = self._run_state
        if run is not None and not run["done"].done():
            run["done"].set_exception(EngineDied("bash was stopped"))
        await kill_group(self._proc)
        for t in self._pumps:
            t.cancel()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
