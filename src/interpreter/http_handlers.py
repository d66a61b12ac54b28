"""The HTTP routes of the code server: E2B's code-interpreter API plus hutch's extension.

E2B's routes answer as its server does (JSON bodies, plain-text errors:
the SDKs show the text); `POST /contexts/{id}/interrupt` is hutch's own
(hutchd maps OpenSandbox's `DELETE /code?id=` and /v1 onto it).
"""

import json
import sys

import tornado.web

from contexts import ContextRegistry, normalize_language
from engine import EngineDied
from execute_stream import ExecuteStream


class Settings:
    def __init__(self, registry: ContextRegistry, keepalive_s: float, stall_s: float):
        self.registry = registry
        self.keepalive_s = keepalive_s
        self.stall_s = stall_s
        self.ready = False  # the default python context has started (or failed to)


class _Base(tornado.web.RequestHandler):
    def initialize(self, settings: Settings):
        self.s = settings

    def text(self, status: int, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(message)

    def json(self, value, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value))

    def body_json(self):
        """The request's JSON object (empty body: {}); None after answering 400."""
        if not self.request.body.strip():
            return {}
        try:
            body = json.loads(self.request.body)
        except ValueError as e:
            self.text(400, f"invalid JSON body: {e}")
            return None
        if not isinstance(body, dict):
            self.text(400, "the body must be a JSON object")
            return None
        return body

    def write_error(self, status_code, **kwargs):
        # tornado's own errors (405, 500) as plain text like ours, not HTML.
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(self._reason)


class NotFound(_Base):
    def prepare(self):
        self.text(404, f"no route {self.request.method} {self.request.path}")


class Health(_Base):
    def get(self):
        # 503 until the default python context is up, so the template's
        # ready check holds the sandbox's create until the first run is fast.
        if self.s.ready:
            self.json({"status": "ok"})
        else:
            self.text(503, "starting")


class Execute(_Base):
    def prepare(self):
        # Each line is flushed at once; Nagle would hold small lines back.
        self.request.connection.stream.set_nodelay(True)
        self._stream = None

    def on_connection_close(self):
        if self._stream is not None:
            self._stream.client_gone()

    async def post(self):
        body = self.body_json()
        if body is None:
            return
        code = body.get("code")
        if not isinstance(code, str):
            return self.text(400, "'code' must be a string")
        context_id, language = body.get("context_id"), body.get("language")
        if context_id and language:
            return self.text(400, "Only one of context_id or language can be provided, not both.")
        env_vars = body.get("env_vars") or {}
        if not isinstance(env_vars, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
            return self.text(400, "'env_vars' must be an object of strings")
        # Not E2B's: hutchd's OpenSandbox dialect asks for results' text as
        # the kernel gave it, as execd sends it ('abc' keeps its quotes).
        raw_text = body.get("raw_text", False)
        if not isinstance(raw_text, bool):
            return self.text(400, "'raw_text' must be a boolean")
        if context_id:
            ctx = self.s.registry.get(context_id)
            if ctx is None:
                return self.text(404, f"Context {context_id} not found")
        else:
            lang = normalize_language(language)
            try:
                ctx = await self.s.registry.default(lang)
            except ValueError as e:
                return self.text(400, str(e))
            except EngineDied as e:
                return self.text(500, f"the default {lang} context did not start: {e}")
        self.set_header("Content-Type", "application/x-ndjson")
        # Which context runs it (a default one has an id too): hutchd's
        # OpenSandbox dialect names it in its `init` event, so the client
        # can interrupt it. E2B's clients ignore the header.
        self.set_header("X-Hutch-Context-Id", ctx.id)
        self._stream = ExecuteStream(self, self.s.keepalive_s, self.s.stall_s, raw_text)
        if self.request.connection.stream.closed():
            return
        await self._stream.serve(ctx, code, env_vars)


class Contexts(_Base):
    async def post(self):
        body = self.body_json()
        if body is None:
            return
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return self.text(400, "'cwd' must be a string")
        try:
            ctx = await self.s.registry.create(normalize_language(body.get("language")), cwd)
        except ValueError as e:
            return self.text(400, str(e))
        except EngineDied as e:
            return self.text(500, f"the context did not start: {e}")
        self.json(ctx.to_json())

    def get(self):
        self.json([c.to_json() for c in self.s.registry.list()])


class ContextItem(_Base):
    async def delete(self, context_id):
        if not await self.s.registry.remove(context_id):
            return self.text(404, f"Context {context_id} not found")
        self.json(None)


class ContextRestart(_Base):
    async def post(self, context_id):
        ctx = self.s.registry.get(context_id)
        if ctx is None:
            return self.text(404, f"Context {context_id} not found")
        await ctx.restart()
        self.json(None)


class ContextInterrupt(_Base):
    async def post(self, context_id):
        ctx = self.s.registry.get(context_id)
        if ctx is None:
            return self.text(404, f"Context {context_id} not found")
        await ctx.interrupt()
        self.json(None)


def _log_failures(handler) -> None:
    # Only the server's own failures: 4xx answers are the client's business,
    # and a line per request would fill the sandbox's start-command log.
    if handler.get_status() >= 500 and handler.request.path != "/health":
        r = handler.request
        print(f"{handler.get_status()} {r.method} {r.uri}", file=sys.stderr, flush=True)


def make_app(settings: Settings) -> tornado.web.Application:
    args = {"settings": settings}
    return tornado.web.Application([
        (r"/health", Health, args),
        (r"/execute", Execute, args),
        (r"/contexts", Contexts, args),
        (r"/contexts/([^/]+)", ContextItem, args),
        (r"/contexts/([^/]+)/restart", ContextRestart, args),
        (r"/contexts/([^/]+)/interrupt", ContextInterrupt, args),
    ], default_handler_class=NotFound, default_handler_args=args, log_function=_log_failures)
