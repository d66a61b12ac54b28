"""The PyPI `e2b-code-interpreter` SDK, unmodified, against a live hutchd.

Configured only by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY (run.sh sets
them). The cases are the npm suite's (../e2b/code_interpreter.test.mjs):
Sandbox.create() asks for the SDK's default template `code-interpreter-v1`,
which hutch's default aliases resolve to `code-interpreter`, and the SDK
reaches the code server on port 49999 through hutchd's port relay. The
sync `Sandbox` carries the suite; `AsyncSandbox` gets a few cases of its own.
"""

import asyncio
import base64
import unittest

from e2b.exceptions import TimeoutException
from e2b_code_interpreter import AsyncSandbox, Sandbox
from e2b_code_interpreter.charts import ChartType

SANDBOX_TIMEOUT_S = 600


class SyncSandboxTest(unittest.TestCase):
    sbx: Sandbox

    @classmethod
    def setUpClass(cls):
        cls.sbx = Sandbox.create(envs={"HUTCH_CI": "create-time"}, timeout=SANDBOX_TIMEOUT_S)

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()

    def test_default_template_alias(self):
        info = self.sbx.get_info()
        self.assertTrue(
            info.template_id in ("code-interpreter", "code-interpreter-v1")
            or info.name == "code-interpreter",
            info,
        )
        r = self.sbx.run_code("1+1")
        self.assertEqual(r.text, "2")
        self.assertIsNone(r.error)

    def test_state_persists(self):
        self.sbx.run_code("x = 41")
        r = self.sbx.run_code("x += 1\nx")
        self.assertEqual(r.text, "42")

    def test_stdout_stderr_and_callbacks(self):
        out, err = [], []
        r = self.sbx.run_code(
            'import sys\nprint("hello")\nprint("oops", file=sys.stderr)',
            on_stdout=lambda m: out.append(m.line),
            on_stderr=lambda m: err.append(m.line),
        )
        self.assertEqual(r.logs.stdout, ["hello\n"])
        self.assertEqual(r.logs.stderr, ["oops\n"])
        self.assertEqual(out, ["hello\n"])
        self.assertEqual(err, ["oops\n"])

    def test_zero_division_is_execution_error(self):
        r = self.sbx.run_code("1/0")
        self.assertIsNotNone(r.error)
        self.assertEqual(r.error.name, "ZeroDivisionError")
        self.assertIn("division by zero", r.error.value)
        self.assertIn("ZeroDivisionError", r.error.traceback)

    def test_matplotlib_png_and_line_chart(self):
        r = self.sbx.run_code(
            "import matplotlib.pyplot as plt\n"
            'plt.plot([1, 2, 3], [1, 4, 9], label="sq")\n'
            'plt.title("Squares")\nplt.xlabel("n")\nplt.ylabel("n^2")\nplt.show()'
        )
        self.assertIsNone(r.error)
        imgs = [x for x in r.results if x.png]
        self.assertTrue(imgs, [x.formats() for x in r.results])
        self.assertEqual(base64.b64decode(imgs[0].png)[1:4], b"PNG")
        chart = imgs[0].chart
        self.assertIsNotNone(chart)
        self.assertEqual(chart.type, ChartType.LINE)
        self.assertEqual(chart.title, "Squares")

    def test_dataframe_gives_data_or_html(self):
        r = self.sbx.run_code('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
        self.assertIsNone(r.error)
        main = [x for x in r.results if x.is_main_result]
        self.assertTrue(main, r.results)
        self.assertTrue(main[0].data or main[0].html, main[0].formats())
        if main[0].data:
            self.assertEqual(main[0].data["a"], [1, 2])

    def test_env_vars_per_call_and_create_time(self):
        r = self.sbx.run_code('import os\nos.environ.get("PER_CALL")', envs={"PER_CALL": "v1"})
        self.assertEqual(r.text, "v1")
        after = self.sbx.run_code('import os\nos.environ.get("PER_CALL", "unset")')
        self.assertEqual(after.text, "unset")
        created = self.sbx.run_code('import os\nos.environ.get("HUTCH_CI")')
        self.assertEqual(created.text, "create-time")

    def test_contexts(self):
        ctx = self.sbx.create_code_context(cwd="/tmp")
        self.assertTrue(ctx.id)
        self.assertEqual(ctx.cwd, "/tmp")
        self.assertIn(ctx.id, [c.id for c in self.sbx.list_code_contexts()])
        cwd = self.sbx.run_code("import os\ny = 7\nos.getcwd()", context=ctx)
        self.assertEqual(cwd.text, "/tmp")
        # Contexts are separate: the default context's variables are not here.
        self.sbx.run_code("only_default = 1")
        sep = self.sbx.run_code('"only_default" in globals()', context=ctx)
        self.assertEqual(sep.text, "False")
        self.sbx.restart_code_context(ctx)
        gone = self.sbx.run_code('"y" in globals()', context=ctx)
        self.assertEqual(gone.text, "False")
        self.sbx.remove_code_context(ctx)
        self.assertNotIn(ctx.id, [c.id for c in self.sbx.list_code_contexts()])

    def test_js_and_bash_keep_state(self):
        self.sbx.run_code("var k = 20", language="js")
        js = self.sbx.run_code("k + 22", language="js")
        self.assertIsNone(js.error)
        self.assertEqual(js.text, "42")
        self.sbx.run_code("N=6", language="bash")
        sh = self.sbx.run_code('echo "$((N*7))"; whoami', language="bash")
        self.assertIsNone(sh.error)
        self.assertEqual("".join(sh.logs.stdout), "42\nuser\n")

    def test_timeout_interrupts_and_keeps_variables(self):
        self.sbx.run_code('kept = "still here"')
        with self.assertRaises(TimeoutException):
            self.sbx.run_code("import time\ntime.sleep(30)", timeout=2)
        r = self.sbx.run_code("kept", timeout=30)
        self.assertEqual(r.text, "still here")


class AsyncSandboxTest(unittest.IsolatedAsyncioTestCase):
    """AsyncSandbox: one sandbox per case (its HTTP clients belong to the
    event loop each IsolatedAsyncioTestCase case runs in)."""

    async def asyncSetUp(self):
        self.sbx = await AsyncSandbox.create(timeout=SANDBOX_TIMEOUT_S)

    async def asyncTearDown(self):
        await self.sbx.kill()

    async def test_state_callbacks_error_and_contexts(self):
        await self.sbx.run_code("x = 41")
        out = []

        async def on_stdout(m):
            out.append(m.line)

        r = await self.sbx.run_code("x += 1\nprint(x)\nx", on_stdout=on_stdout)
        self.assertEqual(r.text, "42")
        self.assertEqual(out, ["42\n"])
        err = await self.sbx.run_code("1/0")
        self.assertEqual(err.error.name, "ZeroDivisionError")
        ctx = await self.sbx.create_code_context(cwd="/tmp", language="python")
        r = await self.sbx.run_code('import os\n("x" in globals(), os.getcwd())', context=ctx)
        self.assertEqual(r.text, "(False, '/tmp')")
        await self.sbx.remove_code_context(ctx.id)
        self.assertNotIn(ctx.id, [c.id for c in await self.sbx.list_code_contexts()])

    async def test_concurrent_runs_in_two_contexts(self):
        a = await self.sbx.create_code_context()
        b = await self.sbx.create_code_context()
        ra, rb = await asyncio.gather(
            self.sbx.run_code("import time\ntime.sleep(1)\nv = 'a'\nv", context=a),
            self.sbx.run_code("import time\ntime.sleep(1)\nv = 'b'\nv", context=b),
        )
        self.assertEqual((ra.text, rb.text), ("a", "b"))

    async def test_timeout_keeps_variables(self):
        await self.sbx.run_code('kept = "still here"')
        with self.assertRaises(TimeoutException):
            await self.sbx.run_code("import time\ntime.sleep(30)", timeout=2)
        r = await self.sbx.run_code("kept", timeout=30)
        self.assertEqual(r.text, "still here")


if __name__ == "__main__":
    unittest.main()
