"""The PyPI `opensandbox-code-interpreter` SDK, unmodified, against hutchd.

Configured only by OPEN_SANDBOX_DOMAIN (<addr>/opensandbox) and
OPEN_SANDBOX_API_KEY (run.sh sets them). It follows the SDK's README: a
sandbox from the code-interpreter image with the image's entrypoint, then
CodeInterpreter.create (whose strict health check probes the interpreter
runtime's port through execd's /command), contexts and runs over execd's
/code routes, which hutchd translates onto the code server E2B's SDKs use.
The cases are the E2B suite's where this SDK has the feature; where it has
not, the case says so and tests what it has:
- results: the SDK keeps only a result's text/plain (EventNodeResults), so
  a plot is seen as its figure's text, a DataFrame as its text table;
- no per-run env vars (RunCodeRequest is code + context): the sandbox's
  create-time env is checked instead;
- contexts have no cwd and no restart: deleting a context and creating a
  new one is the way to a clean state;
- no per-run timeout: `interrupt` (DELETE /code?id=) stops a run, and an
  asyncio timeout that drops the stream interrupts it too.
"""

import asyncio
import threading
import unittest
from datetime import timedelta

from code_interpreter import CodeInterpreter, CodeInterpreterSync, SupportedLanguage
from opensandbox import Sandbox, SandboxSync
from opensandbox.config import ConnectionConfig, ConnectionConfigSync
from opensandbox.models.execd import ExecutionHandlers
from opensandbox.models.execd_sync import ExecutionHandlersSync

# The README's image and entrypoint; hutch maps the image to its
# `code-interpreter` template, whose code server is already up.
IMAGE = "opensandbox/code-interpreter:v1.1.0"
ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"]
SANDBOX_LIFETIME = timedelta(minutes=10)


def texts(messages):
    return "".join(m.text for m in messages)


def result_text(execution):
    return execution.result[0].text if execution.result else None


class SyncCodeInterpreterTest(unittest.TestCase):
    """The README's synchronous flow: SandboxSync + CodeInterpreterSync."""

    sandbox: SandboxSync
    interp: CodeInterpreterSync

    @classmethod
    def setUpClass(cls):
        config = ConnectionConfigSync(request_timeout=timedelta(seconds=60))
        cls.sandbox = SandboxSync.create(
            IMAGE,
            connection_config=config,
            entrypoint=ENTRYPOINT,
            env={"PYTHON_VERSION": "3.11", "HUTCH_CI": "create-time"},
            timeout=SANDBOX_LIFETIME,
        )
        cls.interp = CodeInterpreterSync.create(sandbox=cls.sandbox)

    @classmethod
    def tearDownClass(cls):
        cls.interp.close()
        cls.sandbox.kill()
        cls.sandbox.close()

    def test_default_context_keeps_state(self):
        r = self.interp.codes.run("result = 2 + 2\nresult")
        self.assertIsNone(r.error)
        self.assertEqual(result_text(r), "4")
        self.interp.codes.run("x = 41", language=SupportedLanguage.PYTHON)
        r = self.interp.codes.run("x += 1\nx", language=SupportedLanguage.PYTHON)
        self.assertEqual(result_text(r), "42")

    def test_created_context_keeps_state(self):
        ctx = self.interp.codes.create_context(SupportedLanguage.PYTHON)
        self.assertTrue(ctx.id)
        self.interp.codes.run("users = ['Alice', 'Bob']", context=ctx)
        r = self.interp.codes.run("users.append('Dave')\nlen(users)", context=ctx)
        self.assertEqual(result_text(r), "3")
        self.interp.codes.delete_context(ctx.id)

    def test_stdout_stderr_and_handlers(self):
        out, err, inits, done = [], [], [], []
        handlers = ExecutionHandlersSync(
            on_stdout=lambda m: out.append(m.text),
            on_stderr=lambda m: err.append(m.text),
            on_init=lambda i: inits.append(i.id),
            on_execution_complete=lambda c: done.append(c),
        )
        r = self.interp.codes.run(
            'import sys\nprint("hello")\nprint("oops", file=sys.stderr)', handlers=handlers
        )
        self.assertIsNone(r.error)
        self.assertEqual(texts(r.logs.stdout), "hello\n")
        self.assertEqual(texts(r.logs.stderr), "oops\n")
        self.assertEqual("".join(out), "hello\n")
        self.assertEqual("".join(err), "oops\n")
        self.assertEqual(len(inits), 1)
        self.assertEqual(r.id, inits[0])
        self.assertEqual(len(done), 1)
        self.assertIsNotNone(r.complete)

    def test_zero_division_is_execution_error(self):
        r = self.interp.codes.run("1/0")
        self.assertIsNotNone(r.error)
        self.assertEqual(r.error.name, "ZeroDivisionError")
        self.assertIn("division by zero", r.error.value)
        self.assertIn("ZeroDivisionError", "\n".join(r.error.traceback))

    def test_matplotlib_plot_is_a_result(self):
        # The PNG itself is dropped by the SDK (text/plain only): the
        # figure's display arrives as a result whose text names it.
        seen = []
        r = self.interp.codes.run(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9])\nplt.title('Squares')\nplt.show()",
            handlers=ExecutionHandlersSync(on_result=lambda x: seen.append(x.text)),
        )
        self.assertIsNone(r.error)
        self.assertTrue(any("Figure" in (t or "") for t in seen), seen)

    def test_dataframe_text(self):
        r = self.interp.codes.run(
            'import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})'
        )
        self.assertIsNone(r.error)
        table = result_text(r)
        self.assertIsNotNone(table)
        self.assertEqual(table.split("\n")[0].split(), ["a", "b"])
        self.assertEqual(table.split("\n")[2].split(), ["1", "2", "y"])

    def test_create_time_env(self):
        # No per-run env vars in this SDK: the sandbox's env reaches kernels.
        r = self.interp.codes.run('import os\nos.environ.get("HUTCH_CI")')
        self.assertEqual(result_text(r), "'create-time'")

    def test_contexts_isolation_list_get_delete(self):
        codes = self.interp.codes
        a = codes.create_context(SupportedLanguage.PYTHON)
        b = codes.create_context(SupportedLanguage.PYTHON)
        self.assertNotEqual(a.id, b.id)
        codes.run("y = 7", context=a)
        self.assertEqual(result_text(codes.run('"y" in globals()', context=b)), "False")
        self.assertEqual(result_text(codes.run("y", context=a)), "7")
        got = codes.get_context(a.id)
        self.assertEqual((got.id, got.language), (a.id, "python"))
        ids = [c.id for c in codes.list_contexts(SupportedLanguage.PYTHON)]
        self.assertIn(a.id, ids)
        self.assertIn(b.id, ids)
        # No restart in this SDK: a deleted context is gone, a new one is clean.
        codes.delete_context(a.id)
        self.assertNotIn(a.id, [c.id for c in codes.list_contexts(SupportedLanguage.PYTHON)])
        c = codes.create_context(SupportedLanguage.PYTHON)
        self.assertEqual(result_text(codes.run('"y" in globals()', context=c)), "False")
        # Deleting a language's contexts drops them all; its default context
        # comes back, empty, on the next run without a context.
        codes.run("marker = 1")
        codes.delete_contexts(SupportedLanguage.PYTHON)
        left = [x.id for x in codes.list_contexts(SupportedLanguage.PYTHON)]
        self.assertNotIn(b.id, left)
        self.assertNotIn(c.id, left)
        self.assertEqual(result_text(codes.run('"marker" in globals()')), "False")

    def test_javascript_and_bash_keep_state(self):
        codes = self.interp.codes
        codes.run("var k = 20", language=SupportedLanguage.JAVASCRIPT)
        js = codes.run("k + 22", language=SupportedLanguage.JAVASCRIPT)
        self.assertIsNone(js.error)
        self.assertEqual(result_text(js), "42")
        sh_ctx = codes.create_context(SupportedLanguage.BASH)
        codes.run("N=6", context=sh_ctx)
        sh = codes.run('echo "$((N*7))"; whoami', context=sh_ctx)
        self.assertIsNone(sh.error)
        self.assertEqual(texts(sh.logs.stdout), "42\nuser\n")
        codes.delete_context(sh_ctx.id)

    def test_interrupt_keeps_variables(self):
        codes = self.interp.codes
        ctx = codes.create_context(SupportedLanguage.PYTHON)
        codes.run('kept = "still here"', context=ctx)
        running, done = threading.Event(), threading.Event()
        run_id = []

        # Once the code is running (it printed), interrupt it from another
        # thread, as a caller's own timeout would; again while it has not
        # ended (a SIGINT that lands outside the user's code is swallowed).
        def interrupter():
            running.wait()
            while not done.is_set():
                codes.interrupt(run_id[0])
                done.wait(2.0)

        t = threading.Thread(target=interrupter)
        t.start()
        try:
            r = codes.run(
                "import time\nprint('sleeping', flush=True)\ntime.sleep(60)",
                context=ctx,
                handlers=ExecutionHandlersSync(
                    on_init=lambda i: run_id.append(i.id),
                    on_stdout=lambda m: running.set(),
                ),
            )
        finally:
            done.set()
            running.set()
            t.join()
        self.assertEqual(run_id, [ctx.id])
        self.assertIsNotNone(r.error)
        self.assertEqual(r.error.name, "KeyboardInterrupt")
        self.assertEqual(result_text(codes.run("kept", context=ctx)), "'still here'")
        codes.delete_context(ctx.id)


class AsyncCodeInterpreterTest(unittest.IsolatedAsyncioTestCase):
    """The README's async Quick Start, then an asyncio timeout."""

    async def test_readme_quick_start_and_timeout(self):
        config = ConnectionConfig(request_timeout=timedelta(seconds=60))
        sandbox = await Sandbox.create(
            IMAGE,
            connection_config=config,
            entrypoint=ENTRYPOINT,
            env={"PYTHON_VERSION": "3.11", "JAVA_VERSION": "17", "NODE_VERSION": "20"},
            timeout=SANDBOX_LIFETIME,
        )
        async with sandbox:
            try:
                interpreter = await CodeInterpreter.create(sandbox=sandbox)
                async with interpreter:
                    context = await interpreter.codes.create_context(SupportedLanguage.PYTHON)
                    out = []

                    async def on_stdout(m):
                        out.append(m.text)

                    result = await interpreter.codes.run(
                        "import sys\nprint(sys.version)\nresult = 2 + 2\nresult",
                        context=context,
                        handlers=ExecutionHandlers(on_stdout=on_stdout),
                    )
                    self.assertEqual(result_text(result), "4")
                    self.assertTrue("".join(out).startswith("3."), out)
                    # A caller's timeout drops the stream: hutch interrupts
                    # the run and the context keeps its variables.
                    await interpreter.codes.run('kept = "still here"', context=context)
                    with self.assertRaises(asyncio.TimeoutError):
                        await asyncio.wait_for(
                            interpreter.codes.run("import time\ntime.sleep(30)", context=context),
                            timeout=2,
                        )
                    r = await interpreter.codes.run("kept", context=context)
                    self.assertEqual(result_text(r), "'still here'")
            finally:
                await sandbox.kill()


if __name__ == "__main__":
    unittest.main()
