"""The PyPI `mcp` client (its ClientSession over Streamable HTTP),
unmodified, against a live hutchd's /mcp (run.sh). Needs HUTCH_MCP_URL
(http://ADDR/mcp) and HUTCH_MCP_KEY, and the code-interpreter template built
in hutchd's state dir. Each test opens its own session: the SDK's transport
is an anyio task group, which must be entered and left in one task."""

import asyncio
import base64
import contextlib
import os
import unittest
from datetime import timedelta

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ImageContent, TextContent

URL = os.environ["HUTCH_MCP_URL"]
KEY = os.environ["HUTCH_MCP_KEY"]

TOOLS = {
    "run", "sandbox_create", "sandbox_list", "sandbox_get", "sandbox_kill", "sandbox_pause",
    "sandbox_resume", "sandbox_snapshot", "sandbox_fork", "exec", "run_code", "file_read",
    "file_write", "file_list", "file_remove", "port_url", "template_list",
}

# Sandbox starts and the first matplotlib import can be slow on a loaded
# 2-core machine.
CALL_TIMEOUT = timedelta(seconds=180)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@contextlib.asynccontextmanager
async def session():
    # streamablehttp_client(url, headers=...) is deprecated in mcp 1.30 in
    # favour of passing an httpx client that carries the headers.
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=httpx.Timeout(30, read=300),
    ) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


def text_of(result):
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


class McpPythonTest(unittest.TestCase):
    def run_async(self, coro):
        return asyncio.run(coro)

    async def call(self, s, name, args, **kw):
        return await s.call_tool(name, args, read_timeout_seconds=CALL_TIMEOUT, **kw)

    async def call_ok(self, s, name, args, **kw):
        r = await self.call(s, name, args, **kw)
        self.assertFalse(r.isError, f"{name}: {text_of(r)}")
        self.assertIsInstance(r.structuredContent, dict, name)
        return r

    @contextlib.asynccontextmanager
    async def sandbox(self, s, template):
        r = await self.call_ok(s, "sandbox_create", {"template": template, "ttl_seconds": 600})
        sid = r.structuredContent["id"]
        try:
            yield sid
        finally:
            await self.call(s, "sandbox_kill", {"sandbox_id": sid})

    def test_initialize_and_list_tools(self):
        async def body():
            async with httpx.AsyncClient(
                headers={"Authorization": f"Bearer {KEY}"}
            ) as http, streamable_http_client(URL, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as s:
                    init = await s.initialize()
                    self.assertTrue(init.serverInfo.name)
                    self.assertIsNotNone(init.capabilities.tools)
                    tools = []
                    cursor = None
                    while True:
                        page = await s.list_tools(cursor=cursor) if cursor else await s.list_tools()
                        tools += page.tools
                        cursor = page.nextCursor
                        if not cursor:
                            break
            self.assertEqual({t.name for t in tools}, TOOLS)
            self.assertEqual(len(tools), len(TOOLS))
            for t in tools:
                self.assertEqual(t.inputSchema.get("type"), "object", t.name)
                self.assertTrue((t.description or "").strip(), t.name)

        self.run_async(body())

    def test_run_python(self):
        async def body():
            async with session() as s:
                r = await self.call_ok(s, "run", {"language": "python", "code": "print(6*7)"})
                self.assertIn("42", text_of(r))

        self.run_async(body())

    def test_exec_stdout_stderr_exit_code_and_progress(self):
        async def body():
            async with session() as s, self.sandbox(s, "base") as sid:
                r = await self.call_ok(
                    s, "exec", {"sandbox_id": sid, "cmd": "echo out; echo err >&2; exit 5"})
                sc = r.structuredContent
                self.assertEqual(sc["stdout"], "out\n")
                self.assertEqual(sc["stderr"], "err\n")
                self.assertEqual(sc["exit_code"], 5)

                events = []

                async def on_progress(progress, total, message):
                    events.append(message or "")

                r = await self.call_ok(
                    s, "exec",
                    {"sandbox_id": sid, "cmd": "for i in 1 2 3; do echo line$i; sleep 0.3; done"},
                    progress_callback=on_progress)
                self.assertEqual(r.structuredContent["stdout"], "line1\nline2\nline3\n")
                self.assertTrue(events, "at least one progress notification")
                self.assertIn("line1", "".join(events))

        self.run_async(body())

    def test_file_round_trip(self):
        async def body():
            async with session() as s, self.sandbox(s, "base") as sid:
                await self.call_ok(
                    s, "file_write", {"sandbox_id": sid, "path": "/tmp/p.txt", "content": "héllo\n"})
                r = await self.call_ok(s, "file_read", {"sandbox_id": sid, "path": "/tmp/p.txt"})
                self.assertEqual(r.structuredContent["content"], "héllo\n")

                data = bytes(range(256))
                await self.call_ok(s, "file_write", {
                    "sandbox_id": sid, "path": "/tmp/p.bin", "encoding": "base64",
                    "content": base64.b64encode(data).decode(),
                })
                r = await self.call_ok(
                    s, "file_read", {"sandbox_id": sid, "path": "/tmp/p.bin", "encoding": "base64"})
                self.assertEqual(base64.b64decode(r.structuredContent["content"]), data)

        self.run_async(body())

    def test_run_code_matplotlib_png(self):
        async def body():
            async with session() as s, self.sandbox(s, "code-interpreter") as sid:
                r = await self.call_ok(s, "run_code", {
                    "sandbox_id": sid,
                    "code": "import matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()",
                })
                images = [c for c in r.content
                          if isinstance(c, ImageContent) and c.mimeType == "image/png"]
                self.assertTrue(images, f"an image/png item in {[c.type for c in r.content]}")
                self.assertTrue(base64.b64decode(images[0].data).startswith(PNG_SIGNATURE))

        self.run_async(body())

    def test_unknown_sandbox_is_error_result(self):
        async def body():
            async with session() as s:
                r = await self.call(s, "sandbox_get", {"sandbox_id": "sb_0000000000000000"})
                self.assertTrue(r.isError)
                code = (r.structuredContent or {}).get("error", {}).get("code", "")
                self.assertRegex(code, r"^(sandbox_)?not_found$")

        self.run_async(body())


if __name__ == "__main__":
    unittest.main()
