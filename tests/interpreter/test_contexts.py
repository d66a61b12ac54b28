"""Contexts: create with cwd, isolation, list, restart, remove, interrupts."""

import json
import os
import tempfile
import threading
import unittest

from code_server import CodeServer, check_lines, error, main_text, of_type, stdout

server = None


def setUpModule():
    global server
    server = CodeServer()


def tearDownModule():
    server.stop()


def create(**body):
    return server.json("POST", "/contexts", body)


class ContextsTest(unittest.TestCase):
    def test_create_with_cwd_runs_there(self):
        cwd = tempfile.mkdtemp(dir=server.dir)
        ctx = create(language="python", cwd=cwd)
        self.assertEqual((ctx["language"], ctx["cwd"]), ("python", cwd))
        lines = server.execute("import os\nos.getcwd()", context_id=ctx["id"])
        self.assertEqual(main_text(lines), cwd)

    def test_create_defaults_to_python_in_the_server_cwd(self):
        ctx = create()
        self.assertEqual((ctx["language"], ctx["cwd"]), ("python", server.dir))

    def test_contexts_are_isolated(self):
        a, b = create(), create()
        server.execute("secret = 'a'", context_id=a["id"])
        lines = server.execute("secret", context_id=b["id"])
        self.assertEqual(error(lines)["name"], "NameError")
        self.assertEqual(main_text(server.execute("secret", context_id=a["id"])), "a")

    def test_list_holds_created_contexts_with_language_and_cwd(self):
        ctx = create(language="python")
        listed = server.json("GET", "/contexts")
        self.assertIn(ctx, listed)
        self.assertTrue(all({"id", "language", "cwd"} <= set(c) for c in listed))

    def test_restart_clears_state(self):
        ctx = create()
        server.execute("kept = 1", context_id=ctx["id"])
        self.assertEqual(server.request("POST", f"/contexts/{ctx['id']}/restart"), (200, "null"))
        lines = server.execute("kept", context_id=ctx["id"])
        self.assertEqual(error(lines)["name"], "NameError")
        self.assertEqual(main_text(server.execute("1 + 1", context_id=ctx["id"])), "2")

    def test_remove(self):
        ctx = create()
        self.assertEqual(server.request("DELETE", f"/contexts/{ctx['id']}"), (200, "null"))
        self.assertNotIn(ctx, server.json("GET", "/contexts"))
        status, _ = server.request("POST", "/execute", {"code": "1", "context_id": ctx["id"]})
        self.assertEqual(status, 404)

    def test_unknown_context_routes_are_404(self):
        for method, path in (("DELETE", "/contexts/nope"), ("POST", "/contexts/nope/restart"),
                             ("POST", "/contexts/nope/interrupt")):
            status, body = server.request(method, path)
            self.assertEqual((status, body), (404, "Context nope not found"), path)

    def test_bad_language_or_cwd_is_400(self):
        self.assertEqual(server.request("POST", "/contexts", {"language": "cobol"})[0], 400)
        missing = os.path.join(server.dir, "does-not-exist")
        self.assertEqual(server.request("POST", "/contexts", {"cwd": missing})[0], 400)

    def test_runs_in_one_context_are_serialised(self):
        ctx = create()
        server.execute("order = []", context_id=ctx["id"])
        slow = "import time\norder.append('start')\ntime.sleep(0.3)\norder.append('end')"
        threads = [threading.Thread(target=server.execute, args=(slow,),
                                    kwargs={"context_id": ctx["id"]}) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lines = server.execute("order", context_id=ctx["id"])
        self.assertEqual(main_text(lines), repr(["start", "end"] * 3))

    def test_dead_kernel_is_reported_and_restartable(self):
        ctx = create()
        lines = server.execute("import os\nos._exit(3)", context_id=ctx["id"])
        self.assertEqual(error(lines)["name"], "UnexpectedEndOfExecution")
        self.assertIn("died", error(lines)["value"])
        lines = server.execute("1", context_id=ctx["id"])
        self.assertEqual(error(lines)["name"], "KernelDied")
        server.request("POST", f"/contexts/{ctx['id']}/restart")
        self.assertEqual(main_text(server.execute("1", context_id=ctx["id"])), "1")


def read_until(resp, kind):
    """Reads stream lines until one of `kind`; returns the raw lines read."""
    raw = []
    while True:
        line = resp.readline()
        if not line:
            raise AssertionError(f"the stream ended before a {kind} line: {raw}")
        raw.append(line.decode())
        if json.loads(line)["type"] == kind:
            return raw


class InterruptTest(unittest.TestCase):
    SLOW = ("import time\nstage = 'before'\nprint('started', flush=True)\n"
            "time.sleep(120)\nstage = 'after'")

    def test_interrupt_extension_stops_the_run_and_keeps_state(self):
        ctx = create()
        conn, resp = server.start_execute({"code": self.SLOW, "context_id": ctx["id"]})
        try:
            raw = read_until(resp, "stdout")
            self.assertEqual(server.request("POST", f"/contexts/{ctx['id']}/interrupt"),
                             (200, "null"))
            while True:
                line = resp.readline()
                if not line:
                    break
                raw.append(line.decode())
        finally:
            conn.close()
        lines = check_lines(raw)
        self.assertEqual(error(lines)["name"], "KeyboardInterrupt")
        self.assertEqual(main_text(server.execute("stage", context_id=ctx["id"])), "before")

    def test_client_that_disconnects_interrupts_the_kernel_and_state_stays(self):
        ctx = create()
        conn, resp = server.start_execute({"code": self.SLOW, "context_id": ctx["id"]})
        read_until(resp, "stdout")
        conn.sock.shutdown(2)  # the client goes away mid-run (as an SDK's timeoutMs does)
        conn.close()
        # Queued behind the abandoned run: answers only once it was interrupted
        # (not after its two-minute sleep), and sees the state it left.
        lines = server.execute("stage", context_id=ctx["id"])
        self.assertEqual(main_text(lines), "before")

    def test_client_that_stops_reading_interrupts_the_kernel(self):
        slow_reader = CodeServer("--stall-seconds", "1")
        try:
            ctx = slow_reader.json("POST", "/contexts", {})
            # Endless output to a client that never reads: the socket buffers
            # fill, the server's write stalls, and it gives the client up.
            conn, resp = slow_reader.start_execute(
                {"code": "stage = 'before'\nwhile True:\n    print('x' * 65536)",
                 "context_id": ctx["id"]})
            lines = slow_reader.execute("stage", context_id=ctx["id"])
            self.assertEqual(main_text(lines), "before")
            conn.close()
        finally:
            slow_reader.stop()

    def test_keepalive_while_quiet(self):
        quick = CodeServer("--keepalive-seconds", "0.2")
        try:
            lines = quick.execute("import time\ntime.sleep(1)\nprint('done')")
            self.assertTrue(of_type(lines, "keepalive"))
            self.assertEqual(stdout(lines), "done\n")
        finally:
            quick.stop()


if __name__ == "__main__":
    unittest.main()
