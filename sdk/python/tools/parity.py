"""Runs tests/compat/parity/scenario.txt with the Python SDK, one line per
step; sdk/go/internal/parity does the same with the Go SDK, and
tests/compat/parity/run.sh requires equal output. Standard library only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hutch


def q(b: bytes) -> str:
    """Bytes exactly: printable ASCII as is, every other byte (and the quote
    and backslash) as \\xHH, as the Go runner quotes them."""
    return '"' + "".join(chr(c) if 0x20 <= c < 0x7F and c not in (0x22, 0x5C) else f"\\x{c:02x}"
                         for c in b) + '"'


def exec_line(verb: str, r: hutch.ExecResult, stdout: bytes, stderr: bytes) -> str:
    return f"{verb} exit={r.exit_code} stdout={q(stdout)} stderr={q(stderr)} timed_out={str(r.timed_out).lower()}"


class Runner:
    def __init__(self) -> None:
        self.c = hutch.Client()
        self.sb: Optional[hutch.Sandbox] = None
        self.vol: Optional[hutch.Volume] = None
        self.pid = 0

    def step(self, verb: str, rest: str, args: List[str]) -> str:
        try:
            return self._step(verb, rest, args)
        except hutch.HutchError as e:
            return f"error code={e.code} status={e.status}"

    def _step(self, verb: str, rest: str, args: List[str]) -> str:
        c, sb = self.c, self.sb
        if verb == "create":
            self.sb = c.create(ttl_seconds=600)
            return f"create status={self.sb.info.status}"
        assert sb is not None or verb in ("connect", "volume")
        s: Any = sb
        if verb in ("exec", "timeout"):
            r = s.exec("sleep 30", timeout_seconds=int(args[0])) if verb == "timeout" else s.exec(rest)
            return exec_line(verb, r, r.stdout_bytes, r.stderr_bytes)
        if verb == "argv":
            r = s.exec(json.loads(rest))
            return exec_line(verb, r, r.stdout_bytes, r.stderr_bytes)
        if verb == "stream":
            out: List[bytes] = []
            err: List[bytes] = []
            r = s.exec_stream(rest, on_stdout=out.append, on_stderr=err.append).wait()
            return exec_line(verb, r, b"".join(out), b"".join(err))
        if verb == "write":
            path, _, data = rest.partition(" ")
            w = s.files.write(path, json.loads(data).encode())
            return f"write path={w.path} size={w.size}"
        if verb == "read":
            return "read " + q(s.files.read(args[0]))
        if verb == "range":
            return "range " + q(s.files.read(args[0], offset=int(args[1]), length=int(args[2])))
        if verb == "stat":
            e = s.files.stat(args[0])
            return f"stat name={e.name} type={e.type} size={e.size} mode={e.mode & 0o777:04o}"
        if verb == "mkdir":
            e = s.files.mkdir(args[0])
            return f"mkdir path={e.path} type={e.type}"
        if verb == "move":
            e = s.files.move(args[0], args[1])
            return f"move path={e.path} type={e.type}"
        if verb == "list":
            return "list " + ",".join(sorted(f"{e.path}:{e.type}" for e in s.files.list(args[0], depth=3)))
        if verb == "exists":
            return f"exists {str(s.files.exists(args[0])).lower()}"
        if verb in ("remove", "remove-recursive"):
            s.files.remove(args[0], recursive=verb == "remove-recursive")
            return f"{verb} ok"
        if verb == "bg":
            self.pid = s.processes.start(rest).pid
            return "bg started"
        if verb == "stdin":
            s.processes.send_stdin(self.pid, json.loads(rest))
            return "stdin ok"
        if verb == "wait":
            return f"wait exit={s.processes.wait(self.pid).exit_code}"
        if verb == "attach":
            out, err = [], []
            with s.processes.stream(self.pid, from_offset=int(args[0]), on_stdout=out.append,
                                    on_stderr=err.append) as st:
                r = st.wait()
            return exec_line(verb, r, b"".join(out), b"".join(err))
        if verb in ("pause", "resume"):
            info = s.pause() if verb == "pause" else s.resume()
            return f"{verb} status={info.status}"
        if verb == "fork":
            kids = s.fork(int(args[0]))
            outs = []
            for k in kids:
                outs.append(q(k.exec("cat /home/p/sub/b.txt 2>&1; echo $?").stdout_bytes))
                k.close()
            return f"fork count={len(kids)} outputs={','.join(outs)}"
        if verb == "volume":
            self.vol = c.volumes.create(args[0], size_mb=32)
            return f"volume name={self.vol.name} size_mb={self.vol.info.size_mb}"
        if verb == "volwrite":
            assert self.vol is not None
            path, _, data = rest.partition(" ")
            return f"volwrite size={self.vol.files.write(path, json.loads(data).encode()).size}"
        if verb == "volread":
            assert self.vol is not None
            return "volread " + q(self.vol.files.read(args[0]))
        if verb == "voldelete":
            assert self.vol is not None
            self.vol.delete()
            return "voldelete ok"
        if verb == "connect":
            return f"connect status={c.connect(args[0]).info.status}"
        if verb == "delete":
            s.delete()
            return "delete ok"
        sys.exit(f"parity: unknown step {verb!r}")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: parity.py SCENARIO", file=sys.stderr)
        return 2
    r = Runner()
    try:
        for raw in Path(sys.argv[1]).read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            verb, _, rest = line.partition(" ")
            print(r.step(verb, rest, rest.split()), flush=True)
    finally:
        if r.sb is not None:
            r.sb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
