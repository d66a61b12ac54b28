"""Contexts: named, persistent interpreters, and the registry that holds them.

A Context owns one engine (python_kernel, node_engine, bash_engine) and
runs its executions one at a time, in arrival order (asyncio.Lock is
FIFO). It outlives its engine: restart swaps in a new one, and a dead
engine stays dead (reported on every run) until the client restarts
the context. The registry keeps the contexts by id and one default
context per language, made when first needed (python's at server start).
"""

import asyncio
import os
import traceback
import uuid
from typing import Callable, Dict, List, Optional

import output_lines
from bash_engine import BashEngine
from engine import Emit, Engine, EngineDied
from node_engine import NodeEngine
from python_kernel import PythonKernel

LANGUAGES = ("python", "javascript", "typescript", "bash")
_ALIASES = {"js": "javascript", "ts": "typescript", "sh": "bash", "py": "python",
            "python3": "python"}


def normalize_language(language: Optional[str]) -> str:
    """E2B's rules: lower-cased, js → javascript, ts → typescript; none → python."""
    lang = (language or "python").strip().lower()
    return _ALIASES.get(lang, lang)


def make_engine(language: str, cwd: str) -> Engine:
    if language == "python":
        return PythonKernel(cwd)
    if language in ("javascript", "typescript"):
        return NodeEngine(cwd, language)
    if language == "bash":
        return BashEngine(cwd)
    raise ValueError(f"unsupported language '{language}' (supported: {', '.join(LANGUAGES)})")


class Ticket:
    """One execution's place in its context's queue."""

    def __init__(self):
        self.started = False  # holds the engine: from now on it is interrupted, not cancelled


class Context:
    def __init__(self, language: str, cwd: str, factory: Callable[[str, str], Engine]):
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self._factory = factory
        self._engine: Optional[Engine] = None
        self._start_error = ""
        self._queue = asyncio.Lock()
        self._restarting = asyncio.Lock()
        self._ready = asyncio.Event()  # cleared while the engine is being (re)started
        self._generation = 0  # bumped when the engine is replaced or the context removed
        self._running: Optional[Ticket] = None
        self.removed = False

    def to_json(self) -> dict:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    async def start(self) -> None:
        """Starts the engine; raises EngineDied (with the reason) if it cannot."""
        engine = self._factory(self.language, self.cwd)
        try:
            await engine.start()
        except Exception as e:
            await engine.shutdown()
            self._start_error = str(e) or type(e).__name__
            self._ready.set()
            raise EngineDied(self._start_error) from e
        self._engine, self._start_error = engine, ""
        self._ready.set()

    async def execute(self, code: str, env_vars: Optional[Dict[str, str]], emit: Emit,
                      ticket: Ticket) -> None:
        async with self._queue:
            await self._ready.wait()
            ticket.started = True
            self._running = ticket
            try:
                await self._run(code, env_vars, emit)
            finally:
                self._running = None

    async def _run(self, code, env_vars, emit) -> None:
        engine, generation = self._engine, self._generation
        if self.removed:
            emit(output_lines.error("ExecutionAborted", "the context was removed", ""))
            return
        if engine is None or not engine.alive():
            reason = self._start_error or "its interpreter has ended"
            emit(output_lines.error("KernelDied", f"the context cannot run code: {reason}; "
                                    "restart the context", ""))
            return
        try:
            await engine.run(code, env_vars, emit)
        except EngineDied as e:
            if self.removed:
                emit(output_lines.error("ExecutionAborted", "the context was removed", ""))
            elif generation != self._generation:
                emit(output_lines.error("ContextRestarting", "the context was restarted", ""))
            else:
                emit(output_lines.error("UnexpectedEndOfExecution", str(e), ""))
        except Exception as e:  # a bug of ours: the client hears of it, the server goes on
            emit(output_lines.error("InternalError", repr(e), traceback.format_exc()))

    async def interrupt(self, ticket: Optional[Ticket] = None) -> bool:
        """Interrupts the running execution (only if it is `ticket`'s, when given)."""
        if self._running is None or (ticket is not None and self._running is not ticket):
            return False
        if self._engine is not None:
            await self._engine.interrupt()
        return True

    async def restart(self) -> None:
        """A new engine; the state is gone and a run in progress ends (ContextRestarting)."""
        async with self._restarting:
            self._generation += 1
            self._ready.clear()
            old, self._engine = self._engine, None
            if old is not None:
                await old.shutdown()
            try:
                await self.start()
            except EngineDied:
                pass  # reported on the next run, with its reason

    async def remove(self) -> None:
        self.removed = True
        self._generation += 1
        if self._engine is not None:
            await self._engine.shutdown()
        self._ready.set()


class ContextRegistry:
    def __init__(self, default_cwd: str, factory: Callable[[str, str], Engine] = make_engine):
        self.default_cwd = default_cwd
        self._factory = factory
        self._contexts: Dict[str, Context] = {}
        self._defaults: Dict[str, asyncio.Task] = {}

    async def create(self, language: str, cwd: Optional[str]) -> Context:
        """A new started context. ValueError: bad language or cwd; EngineDied: no start."""
        if language not in LANGUAGES:
            raise ValueError(f"unsupported language '{language}' (supported: "
                             f"{', '.join(LANGUAGES)})")
        cwd = cwd or self.default_cwd
        if not os.path.isdir(cwd):
            raise ValueError(f"cwd '{cwd}' is not a directory")
        ctx = Context(language, cwd, self._factory)
        self._contexts[ctx.id] = ctx
        try:
            await ctx.start()
        except EngineDied:
            self._contexts.pop(ctx.id, None)
            raise
        return ctx

    def default_task(self, language: str) -> asyncio.Task:
        """The language's default context, started once however many ask at once."""
        task = self._defaults.get(language)
        if task is None or (task.done() and (task.exception() is not None or
                                             task.result().removed)):
            task = asyncio.ensure_future(self.create(language, None))
            self._defaults[language] = task
        return task

    async def default(self, language: str) -> Context:
        return await asyncio.shield(self.default_task(language))

    def get(self, context_id: str) -> Optional[Context]:
        return self._contexts.get(context_id)

    def list(self) -> List[Context]:
        return list(self._contexts.values())

    async def remove(self, context_id: str) -> bool:
        ctx = self._contexts.pop(context_id, None)
        if ctx is None:
            return False
        await ctx.remove()
        return True

    async def close(self) -> None:
        for ctx in list(self._contexts.values()):
            await ctx.remove()
        self._contexts.clear()
