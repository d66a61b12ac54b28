"""The code interpreter: run_code with contexts and rich results (sandboxes
of the code-interpreter template, in HUTCH_CI_STATE_DIR)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Iterator, List

import pytest

import hutch
from conftest import Server


@pytest.fixture(scope="module")
def code_sandbox(server: Server) -> Iterator[hutch.Sandbox]:
    c = server.client()
    if "code-interpreter" not in [t.name for t in c.templates.list()]:
        cli = os.environ.get("HUTCH_CLI_BIN")
        if not cli:
            pytest.skip("no code-interpreter template and no HUTCH_CLI_BIN to build it")
        spec = os.path.join(os.environ["HUTCH_SOURCE_DIR"], "templates", "code-interpreter.toml")
        subprocess.run([cli, "template", "build", spec], check=True,
                       env=dict(os.environ, HUTCH_URL=server.url, HUTCH_API_KEY=server.key))
    with c.create(template="code-interpreter", ttl_seconds=900) as sb:
        yield sb


def test_run_code(code_sandbox: hutch.Sandbox) -> None:
    out: List[str] = []
    ex = code_sandbox.run_code("print('hi')\nx = 41\nx + 1", on_stdout=lambda line: out.append(line.text))
    assert ex.text == "42" and ex.error is None
    assert ex.stdout_text == "hi\n" and out == ["hi\n"]
    assert ex.execution_count >= 1
    assert code_sandbox.run_code("x * 2").text == "82"  # the default context kept x
    err = code_sandbox.run_code("1/0")
    assert err.error is not None and err.error.name == "ZeroDivisionError" and "division" in err.error.value
    html = code_sandbox.run_code("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    assert html.results[0].html and "<table" in (html.results[0].html or "")
    t = code_sandbox.run_code("import time\ntime.sleep(30)", timeout_ms=500)
    assert t.timed_out and t.error is not None and t.error.name == "TimeoutError"
    assert code_sandbox.run_code("x").text == "41"  # state kept after the timeout


def test_code_contexts(code_sandbox: hutch.Sandbox) -> None:
    ctx = code_sandbox.create_code_context("bash", cwd="/tmp")
    assert (ctx.language, ctx.cwd) == ("bash", "/tmp")
    code_sandbox.run_code("cd /etc; X=1", context_id=ctx.id)
    assert code_sandbox.run_code("pwd; echo $X", context_id=ctx.id).stdout_text == "/etc\n1\n"
    assert ctx.id in [c.id for c in code_sandbox.code_contexts()]
    py = code_sandbox.create_code_context("python")
    code_sandbox.run_code("y = 5", context_id=py.id)
    code_sandbox.restart_code_context(py.id)
    e = code_sandbox.run_code("y", context_id=py.id)
    assert e.error is not None and e.error.name == "NameError"
    code_sandbox.interrupt_code_context(py.id)
    assert code_sandbox.run_code("2 + 2", language="javascript").text == "4"
    code_sandbox.remove_code_context(ctx.id)
    with pytest.raises(hutch.NotFoundError):
        code_sandbox.remove_code_context(ctx.id)
    code_sandbox.remove_code_context(py.id)


def test_async_run_code(server: Server, code_sandbox: hutch.Sandbox) -> None:
    from hutch.aio import AsyncClient

    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            sb = c.sandbox(code_sandbox.id)
            ex = await sb.run_code("print('a')\n6 * 7")
            assert ex.text == "42" and ex.stdout_text == "a\n"
            ctx = await sb.create_code_context("bash")
            assert (await sb.run_code("echo $((1+2))", context_id=ctx.id)).stdout_text == "3\n"
            await sb.remove_code_context(ctx.id)

    asyncio.run(main())
