"""JavaScript, TypeScript and bash contexts: state across runs, output, errors."""

import os
import shutil
import subprocess
import unittest

from code_server import CodeServer, error, main_text, of_type, read_past, stderr, stdout

server = None


def setUpModule():
    global server
    server = CodeServer()


def tearDownModule():
    server.stop()


def typescript_available():
    """Whether Node.js finds Debian's node-typescript (the template installs it)."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        return False
    probe = ("for (const p of ['typescript', '/usr/share/nodejs/typescript']) "
             "{ try { require(p); process.exit(0) } catch (e) {} } process.exit(1)")
    return subprocess.run([node, "-e", probe]).returncode == 0


class JavaScriptTest(unittest.TestCase):
    def test_state_persists_and_last_expression_is_the_result(self):
        server.execute("var total = 40; let step = 2", language="js")
        lines = server.execute("total + step", language="js")
        self.assertEqual(main_text(lines), "42")

    def test_console_goes_to_stdout_and_stderr(self):
        lines = server.execute("console.log('out', 1); console.error('err')", language="javascript")
        self.assertEqual(stdout(lines), "out 1\n")
        self.assertEqual(stderr(lines), "err\n")

    def test_top_level_await_keeps_its_declarations(self):
        lines = server.execute("const later = await Promise.resolve(5)\nlater * 2", language="js")
        self.assertEqual(main_text(lines), "10")
        self.assertEqual(main_text(server.execute("later", language="js")), "5")

    def test_thrown_error(self):
        e = error(server.execute("throw new RangeError('too far')", language="js"))
        self.assertEqual((e["name"], e["value"]), ("RangeError", "too far"))
        self.assertIn("RangeError: too far", e["traceback"])

    def test_env_vars_for_one_run(self):
        lines = server.execute("process.env.HUTCH_JS_VAR", language="js",
                               env_vars={"HUTCH_JS_VAR": "set"})
        self.assertEqual(main_text(lines), "set")
        self.assertIsNone(main_text(server.execute("process.env.HUTCH_JS_VAR", language="js")))

    def test_interrupt_stops_a_busy_loop_and_keeps_state(self):
        ctx = server.json("POST", "/contexts", {"language": "js"})
        self.assertEqual(ctx["language"], "javascript")
        server.execute("var kept = 'yes'", context_id=ctx["id"])
        conn, resp = server.start_execute({"code": "console.log('spin'); while (true) {}",
                                           "context_id": ctx["id"]})
        read_past(resp, b"spin")
        conn.sock.shutdown(2)
        conn.close()
        self.assertEqual(main_text(server.execute("kept", context_id=ctx["id"])), "yes")


@unittest.skipUnless(typescript_available(),
                     "TypeScript needs Debian's node-typescript, not installed on this host")
class TypeScriptTest(unittest.TestCase):
    def test_types_are_stripped_and_state_persists(self):
        server.execute("const width: number = 6", language="ts")
        lines = server.execute("function area(h: number): number { return width * h }\narea(7)",
                               language="typescript")
        self.assertEqual(main_text(lines), "42")


class BashTest(unittest.TestCase):
    def test_variables_and_cwd_persist(self):
        sub = os.path.join(server.dir, "sub")
        os.makedirs(sub, exist_ok=True)
        server.execute(f"GREETING=hello; cd {sub}", language="bash")
        lines = server.execute("echo $GREETING from $(pwd)", language="bash")
        self.assertEqual(stdout(lines), f"hello from {sub}\n")

    def test_stderr_and_exit_status(self):
        lines = server.execute("echo oops >&2; false", language="bash")
        self.assertEqual(stderr(lines), "oops\n")
        self.assertEqual(error(lines)["value"], "exit status 1")
        self.assertIsNone(error(server.execute("true", language="bash")))

    def test_env_vars_for_one_run(self):
        lines = server.execute("echo \"[$HUTCH_SH_VAR]\"", language="bash",
                               env_vars={"HUTCH_SH_VAR": "it's set"})
        self.assertEqual(stdout(lines), "[it's set]\n")
        lines = server.execute("echo \"[${HUTCH_SH_VAR-unset}]\"", language="bash")
        self.assertEqual(stdout(lines), "[unset]\n")

    def test_output_streams_while_running(self):
        conn, resp = server.start_execute({"code": "echo first; sleep 0.5; echo second",
                                           "language": "bash"})
        try:
            kinds = []
            while True:
                line = resp.readline()
                if not line:
                    break
                kinds.append(line)
        finally:
            conn.close()
        texts = [l for l in kinds if b'"stdout"' in l]
        self.assertEqual(len(texts), 2)  # two lines as they came, not one at the end

    def test_interrupt_keeps_the_shell(self):
        ctx = server.json("POST", "/contexts", {"language": "bash"})
        server.execute("KEEP=1", context_id=ctx["id"])
        conn, resp = server.start_execute({"code": "echo go; sleep 120; KEEP=2",
                                           "context_id": ctx["id"]})
        read_past(resp, b"go")
        server.request("POST", f"/contexts/{ctx['id']}/interrupt")
        rest = resp.read()
        conn.close()
        self.assertIn(b"end_of_execution", rest)
        self.assertEqual(stdout(server.execute("echo $KEEP", context_id=ctx["id"])), "1\n")

    def test_result_lines_are_absent(self):
        self.assertFalse(of_type(server.execute("echo x", language="bash"), "result"))


if __name__ == "__main__":
    unittest.main()
