"""Streams one execution to its HTTP client as E2B's newline-delimited JSON.

The run itself is a task on the context (queued behind earlier runs);
its lines go through a queue to the response, so a slow client never
stalls the kernel's message loop. While nothing comes for
`keepalive_s` a keepalive line goes out; end_of_execution is always the
last line.

A client that goes away (the connection closes, or a write stays
unflushed for `stall_s`: it stopped reading) abandons the run: a queued
run is cancelled, a running one interrupted. The interrupt keeps the
context's state, and the run still completes in the background, so the
next execution in the queue starts on an idle interpreter.
"""

import asyncio

from tornado.iostream import StreamClosedError

import output_lines
from contexts import Context, Ticket

_REINTERRUPT_S = 1.0
_END = object()
_GONE = object()


class ExecuteStream:
    # Follow-ups of runs abandoned by their clients, referenced until done.
    _orphans = set()

    def __init__(self, handler, keepalive_s: float, stall_s: float, raw_text: bool = False):
        self._handler = handler
        # A result's text as the kernel gave it (execd keeps a str's
        # quotes) instead of E2B's unquoted one.
        self._raw_text = raw_text
        self._keepalive_s = keepalive_s
        self._stall_s = stall_s
        self._lines = asyncio.Queue()
        self.gone = False

    def client_gone(self) -> None:
        """Called by the handler's on_connection_close."""
        if not self.gone:
            self.gone = True
            self._lines.put_nowait(_GONE)

    def _emit(self, line: dict) -> None:
        if not self.gone:
            self._lines.put_nowait(line)

    async def serve(self, ctx: Context, code: str, env_vars) -> None:
        # The headers go out at once: the SDKs' request timeout runs until
        # they arrive, and a run may wait in its context's queue for long.
        try:
            await asyncio.wait_for(self._handler.flush(), self._stall_s)
        except (StreamClosedError, asyncio.TimeoutError):
            return
        ticket = Ticket()
        task = asyncio.ensure_future(ctx.execute(code, env_vars, self._emit, ticket))
        task.add_done_callback(lambda _: self._lines.put_nowait(_END))
        while True:
            try:
                line = await asyncio.wait_for(self._lines.get(), self._keepalive_s)
            except asyncio.TimeoutError:
                line = output_lines.keepalive()
            if line is _GONE or self.gone:
                break
            if line is _END:
                await self._write(output_lines.end_of_execution())
                if task.exception() is not None:  # pragma: no cover - execute catches its own
                    raise task.exception()
                return
            if not await self._write(line):
                break
        follow = asyncio.ensure_future(self._abandon(ctx, task, ticket))
        ExecuteStream._orphans.add(follow)
        follow.add_done_callback(ExecuteStream._orphans.discard)

    async def _write(self, line: dict) -> bool:
        raw = line.pop(output_lines.RAW_TEXT, None)
        if raw is not None and self._raw_text:
            line["text"] = raw
        try:
            self._handler.write(output_lines.encode(line))
            await asyncio.wait_for(self._handler.flush(), self._stall_s)
            return True
        except (StreamClosedError, asyncio.TimeoutError):
            self.gone = True
            stream = self._handler.request.connection.stream
            if not stream.closed():
                stream.close()
            return False

    async def _abandon(self, ctx: Context, task: asyncio.Task, ticket: Ticket) -> None:
        if task.done():
            return
        if not ticket.started:
            task.cancel()
            return
        # Interrupt again until the run ends: the first SIGINT may land
        # before the code started, inside the kernel's own output machinery
        # (ipykernel then swallows it: "KeyboardInterrupt caught in kernel"),
        # or be caught by the code. Nobody waits for this run any more.
        while not task.done():
            await ctx.interrupt(ticket)
            try:
                await asyncio.wait_for(asyncio.shield(task), _REINTERRUPT_S)
            except asyncio.TimeoutError:
                continue
            except BaseException:
                return
