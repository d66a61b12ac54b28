"""The asyncio client against the same hutchd: the main calls, concurrency,
cancellation reaching the guest, a streamed round trip, the terminal."""

from __future__ import annotations

import asyncio
import hashlib
from typing import AsyncIterator, List

import pytest

import hutch
from conftest import Server
from hutch.aio import AsyncClient


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_async_sandbox_exec_files_processes(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            async with await c.create(ttl_seconds=300, metadata={"aio": "1"}) as sb:
                r = await sb.exec("echo out; echo err >&2; exit 3")
                assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)
                # Several commands at once on one event loop.
                rs = await asyncio.gather(*(sb.exec(f"echo {i}") for i in range(8)))
                assert [x.stdout for x in rs] == [f"{i}\n" for i in range(8)]
                seen: List[bytes] = []
                async with await sb.exec_stream("echo a; echo b >&2; exit 4", on_stdout=seen.append) as s:
                    events = [ev async for ev in s]
                assert isinstance(events[-1], hutch.ExitEvent) and events[-1].exit_code == 4 and seen == [b"a\n"]

                await sb.files.write("/root/x/a.txt", "hello")
                assert await sb.files.read_text("/root/x/a.txt") == "hello"
                assert await sb.files.read("/root/x/a.txt", offset=1, length=3) == b"ell"
                assert [e.name for e in await sb.files.list("/root/x")] == ["a.txt"]
                await sb.files.move("/root/x/a.txt", "/root/x/b.txt")
                assert not await sb.files.exists("/root/x/a.txt")
                with pytest.raises(hutch.FileNotFoundInSandboxError):
                    await sb.files.read("/root/x/a.txt")

                p = await sb.processes.start("read a; echo got:$a")
                await p.send_stdin("z\n", eof=True)
                assert (await p.wait()).exit_code == 0
                async with await p.stream() as s:
                    out = b"".join([e.data async for e in s if isinstance(e, hutch.OutputEvent)])
                assert out == b"got:z\n"
                assert [x.id async for x in await c.list(metadata={"aio": "1"})] == [sb.id]
                await sb.set_ttl(600)
                assert (await sb.metrics()).pids >= 1
            assert (await c.sandbox(sb.id).refresh()).status == "stopped"
            with pytest.raises(hutch.SandboxNotFoundError):
                await c.connect("sb_doesnotexist")

    run(main())


def test_async_cancellation_kills_the_command(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            async with await c.create(ttl_seconds=300) as sb:
                task = asyncio.ensure_future(sb.exec("exec sleep 301"))
                for _ in range(300):
                    if any("sleep 301" in " ".join(p.argv) for p in await sb.processes.list()):
                        break
                    await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                for _ in range(300):
                    if "sleep 301" not in (await sb.exec("ps -eo args")).stdout:
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError("the cancelled command still runs")

                s = await sb.exec_stream("echo up; exec sleep 302")
                async for ev in s:
                    if isinstance(ev, hutch.OutputEvent):
                        break
                await s.aclose()
                for _ in range(300):
                    if "sleep 302" not in (await sb.exec("ps -eo args")).stdout:
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError("the closed stream's command still runs")

    run(main())


def test_async_streamed_round_trip_and_pty(server: Server) -> None:
    size, chunk = 32 << 20, 1 << 20

    async def pattern() -> AsyncIterator[bytes]:
        for i in range(size // chunk):
            yield bytes([i % 251]) * chunk

    async def main() -> None:
        w = hashlib.sha256()
        for i in range(size // chunk):
            w.update(bytes([i % 251]) * chunk)
        want = w.hexdigest()
        async with AsyncClient(server.url, server.key) as c:
            async with await c.create(ttl_seconds=300, disk_mb=512) as sb:
                assert (await sb.files.write("/root/big", pattern())).size == size
                h = hashlib.sha256()
                async with await sb.files.open("/root/big") as r:
                    async for part in r:
                        h.update(part)
                assert h.hexdigest() == want
                async with await sb.pty(cols=90, rows=20) as term:
                    await term.write("stty size\n")
                    assert b"20 90" in await term.read_until("20 90")
                    await term.write("exit 6\n")
                    assert (await term.wait()).exit_code == 6

    run(main())
