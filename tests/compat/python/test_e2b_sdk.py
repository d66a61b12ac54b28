"""The PyPI `e2b` SDK (the base SDK), unmodified, against a live hutchd.

Configured by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY alone (`run.sh base`
sets them; ConnectionTest also passes them as call options instead). The
SDK builds envd's URL as: E2B_SANDBOX_URL when set (every envd call then
goes to that one URL with `E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers,
which is how it reaches a hutchd on a random port over plain HTTP); else
`http://localhost:49983` in debug mode; else
`https://49983-{id}.{domain}`. The cases follow the npm suite
(../e2b/e2b_compat.test.mjs) and the SDK's README: the sync `Sandbox`
carries the suite, `AsyncSandbox` runs the same flows on its own
sandbox.
"""

import hashlib
import http.client
import io
import json
import os
import struct
import threading
import unittest
import uuid
from urllib.parse import urlsplit

from e2b import (
    AsyncSandbox,
    AuthenticationException,
    CommandExitException,
    FileNotFoundException,
    FilesystemEventType,
    FileType,
    NotFoundException,
    PtySize,
    Sandbox,
    SandboxException,
    SandboxQuery,
    SandboxState,
    TimeoutException,
)
from e2b.sandbox.filesystem.filesystem import WriteEntry
from support import async_wait_for, sha256, wait_for

SANDBOX_TIMEOUT_S = 600


def via_host(host, path, headers):
    """A GET to hutchd with `host` as its Host header, as a client whose DNS
    sends getHost()'s names to hutchd would send it: (status, body)."""
    api = urlsplit(os.environ["E2B_API_URL"])
    conn = http.client.HTTPConnection(api.hostname, api.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host, **headers})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def connect_stream(sbx, path, body, headers):
    """POSTs a Connect streaming call (JSON codec) to envd through hutchd
    and reads it to its end: [(flags, message)]."""
    api = urlsplit(os.environ["E2B_SANDBOX_URL"])
    conn = http.client.HTTPConnection(api.hostname, api.port, timeout=30)
    try:
        conn.request(
            "POST",
            api.path + path,
            body=body,
            headers={
                "Content-Type": "application/connect+json",
                "Connect-Protocol-Version": "1",
                "E2b-Sandbox-Id": sbx.sandbox_id,
                "E2b-Sandbox-Port": "49983",
                "X-Access-Token": sbx._envd_access_token,
                **headers,
            },
        )
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    frames, i = [], 0
    while i + 5 <= len(data):
        flags, n = struct.unpack(">BI", data[i : i + 5])
        frames.append((flags, json.loads(data[i + 5 : i + 5 + n])))
        i += 5 + n
    return frames


class SyncSandboxTest(unittest.TestCase):
    sbx: Sandbox

    @classmethod
    def setUpClass(cls):
        cls.sbx = Sandbox.create(
            "base",
            timeout=SANDBOX_TIMEOUT_S,
            metadata={"suite": "py-main"},
            envs={"HUTCH_E2B": "yes"},
        )

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()

    # --- lifecycle -----------------------------------------------------

    def test_create_answers_and_info(self):
        self.assertTrue(self.sbx.sandbox_id.startswith("sb_"), self.sbx.sandbox_id)
        self.assertTrue(self.sbx.is_running())
        info = self.sbx.get_info()
        self.assertEqual(info.sandbox_id, self.sbx.sandbox_id)
        self.assertEqual(info.template_id, "base")
        self.assertEqual(info.metadata, {"suite": "py-main"})
        self.assertEqual(info.state, SandboxState.RUNNING)
        # timeout= became the sandbox's end time.
        left = (info.end_at - info.started_at).total_seconds()
        self.assertAlmostEqual(left, SANDBOX_TIMEOUT_S, delta=30)

    def test_set_timeout_moves_end_at(self):
        self.sbx.set_timeout(3600)
        info = self.sbx.get_info()
        self.assertGreater((info.end_at - info.started_at).total_seconds(), 3000)
        self.sbx.set_timeout(SANDBOX_TIMEOUT_S)

    def test_get_metrics(self):
        m = self.sbx.get_metrics()
        self.assertGreaterEqual(len(m), 1)
        self.assertGreaterEqual(m[0].cpu_count, 1)
        self.assertGreater(m[0].mem_used, 0)

    def test_list_with_metadata_filter_and_paging(self):
        suite = f"list-{uuid.uuid4().hex[:8]}"
        made = [Sandbox.create(metadata={"suite": suite, "n": str(i)}, timeout=120) for i in range(3)]
        try:
            pager = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=2)
            first = pager.next_items()
            self.assertEqual(len(first), 2)
            self.assertTrue(pager.has_next)
            second = pager.next_items()
            self.assertEqual(len(second), 1)
            self.assertFalse(pager.has_next)
            self.assertEqual(
                sorted(s.sandbox_id for s in first + second),
                sorted(s.sandbox_id for s in made),
            )
            self.assertEqual(first[0].metadata["suite"], suite)
            self.assertEqual(first[0].state, SandboxState.RUNNING)
            one = Sandbox.list(query=SandboxQuery(metadata={"suite": suite, "n": "1"})).next_items()
            self.assertEqual([s.sandbox_id for s in one], [made[1].sandbox_id])
            # template and started_after narrow the list too.
            base = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}, template="base")).next_items()
            self.assertEqual(len(base), 3)
            other = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}, template="no-such")).next_items()
            self.assertEqual(other, [])
            since = made[1].get_info().started_at
            later = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}, started_after=since)).next_items()
            self.assertEqual(sorted(s.sandbox_id for s in later), sorted(s.sandbox_id for s in made[1:]))
            # order: by start time over the whole set, then paged.
            newest = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), limit=2, order="desc")
            pages = [newest.next_items()]
            self.assertTrue(newest.has_next)
            pages.append(newest.next_items())
            self.assertFalse(newest.has_next)
            self.assertEqual(
                [[s.sandbox_id for s in p] for p in pages],
                [[made[2].sandbox_id, made[1].sandbox_id], [made[0].sandbox_id]],
            )
            oldest = Sandbox.list(query=SandboxQuery(metadata={"suite": suite}), order="asc").next_items()
            self.assertEqual([s.sandbox_id for s in oldest], [s.sandbox_id for s in made])
            made[0].pause()
            paused = Sandbox.list(
                query=SandboxQuery(metadata={"suite": suite}, state=[SandboxState.PAUSED])
            ).next_items()
            self.assertEqual([s.sandbox_id for s in paused], [made[0].sandbox_id])
        finally:
            for s in made:
                s.kill()

    def test_connect_kill_is_running(self):
        s = Sandbox.create(timeout=120)
        same = Sandbox.connect(s.sandbox_id)
        self.assertEqual(same.commands.run("echo connected").stdout, "connected\n")
        self.assertTrue(s.kill())
        self.assertFalse(s.is_running())
        self.assertFalse(Sandbox.kill(s.sandbox_id), "a killed sandbox is gone")
        self.assertFalse(Sandbox.kill("sb_doesnotexist"))

    def test_pause_then_connect_resumes(self):
        s = Sandbox.create(timeout=120)
        try:
            s.files.write("/home/user/keep.txt", "kept")
            self.assertTrue(s.pause())
            self.assertEqual(s.get_info().state, SandboxState.PAUSED)
            self.assertFalse(s.is_running())
            back = Sandbox.connect(s.sandbox_id)
            self.assertEqual(back.get_info().state, SandboxState.RUNNING)
            self.assertEqual(back.files.read("/home/user/keep.txt"), "kept")
        finally:
            Sandbox.kill(s.sandbox_id)

    # --- commands ------------------------------------------------------

    def test_run_stdout_exit_code_user_env(self):
        r = self.sbx.commands.run("echo hi")
        self.assertEqual((r.stdout, r.stderr, r.exit_code), ("hi\n", "", 0))
        who = self.sbx.commands.run("whoami; echo $HOME; echo $HUTCH_E2B; pwd")
        self.assertEqual(who.stdout, "user\n/home/user\nyes\n/home/user\n")
        self.assertEqual(self.sbx.commands.run("whoami", user="root").stdout, "root\n")
        r = self.sbx.commands.run("pwd; echo $A-$B", cwd="/tmp", envs={"A": "1", "B": "2"})
        self.assertEqual(r.stdout, "/tmp\n1-2\n")

    def test_failing_command_raises_command_exit(self):
        with self.assertRaises(CommandExitException) as cm:
            self.sbx.commands.run("echo out; echo oops >&2; exit 3")
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertEqual(cm.exception.stderr, "oops\n")
        self.assertEqual(cm.exception.stdout, "out\n")

    def test_callbacks_stream_while_running(self):
        out, err = [], []
        h = self.sbx.commands.run(
            "echo ready; echo warn >&2; read x; echo done:$x",
            background=True,
            stdin=True,
        )
        got = []

        def waiter():
            got.append(h.wait(on_stdout=out.append, on_stderr=err.append))

        t = threading.Thread(target=waiter)
        t.start()
        wait_for(lambda: "ready" in "".join(out) and "warn" in "".join(err), "streamed output")
        h.send_stdin("go\n")
        t.join(20)
        self.assertEqual(got[0].stdout, "ready\ndone:go\n")
        self.assertEqual(got[0].stderr, "warn\n")

    def test_foreground_callbacks(self):
        out, err = [], []
        r = self.sbx.commands.run(
            "for i in 1 2 3; do echo line$i; done; echo e >&2",
            on_stdout=out.append,
            on_stderr=err.append,
        )
        self.assertEqual("".join(out), "line1\nline2\nline3\n")
        self.assertEqual("".join(err), "e\n")
        self.assertEqual(r.exit_code, 0)

    def test_timeout_raises_and_kills(self):
        marker = f"t{uuid.uuid4().hex[:8]}"
        with self.assertRaises(TimeoutException):
            self.sbx.commands.run(f"sleep 30; echo {marker}", timeout=2)
        wait_for(
            lambda: not any(marker in " ".join(p.args) for p in self.sbx.commands.list()),
            "the timed-out command to be gone",
        )

    def test_deadline_ends_the_stream_with_deadline_exceeded(self):
        # Below the SDK: a Start whose Connect-Timeout-Ms passes ends as
        # connect-go ends a call past its deadline (`deadline_exceeded`, the
        # SDKs' TimeoutException), read here to the end by a client that has
        # no deadline of its own, so the answer is the server's alone.
        body = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 5; echo survived"]}}).encode()
        frames = connect_stream(
            self.sbx, "/process.Process/Start", struct.pack(">BI", 0, len(body)) + body, {"Connect-Timeout-Ms": "1000"}
        )
        self.assertIn("start", frames[0][1]["event"])
        self.assertFalse([f for f in frames if "data" in f[1].get("event", {})], "it never got to echo")
        self.assertFalse([f for f in frames if "end" in f[1].get("event", {})], frames)
        flags, last = frames[-1]
        self.assertEqual(flags, 2)
        self.assertEqual(last["error"]["code"], "deadline_exceeded", last)

    def test_background_list_connect_send_stdin_kill(self):
        h = self.sbx.commands.run("read line; echo got:$line", background=True, stdin=True)
        self.assertGreater(h.pid, 0)
        mine = [p for p in self.sbx.commands.list() if p.pid == h.pid]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0].cmd, "/bin/bash")
        self.assertEqual(mine[0].args, ["-l", "-c", "read line; echo got:$line"])
        h.disconnect()
        again = self.sbx.commands.connect(h.pid)
        self.sbx.commands.send_stdin(h.pid, "hello\n")
        r = again.wait()
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, "got:hello\n")

        sleeper = self.sbx.commands.run("sleep 60", background=True)
        self.assertTrue(self.sbx.commands.kill(sleeper.pid))
        with self.assertRaises(CommandExitException):
            sleeper.wait()
        self.assertFalse(self.sbx.commands.kill(sleeper.pid), "killing an ended command is false")
        other = self.sbx.commands.run("sleep 60", background=True)
        self.assertTrue(other.kill())

    def test_close_stdin(self):
        h = self.sbx.commands.run("cat; echo eof", background=True, stdin=True)
        h.send_stdin("abc\n")
        h.close_stdin()
        self.assertEqual(h.wait().stdout, "abc\neof\n")

    def test_connect_unknown_pid_is_not_found(self):
        with self.assertRaises(NotFoundException):
            self.sbx.commands.connect(999999)

    # --- pty -------------------------------------------------------------

    def test_pty_create_input_resize_kill(self):
        term = self.sbx.pty.create(PtySize(rows=24, cols=80))
        output = bytearray()
        result = []

        def reader():
            try:
                result.append(term.wait(on_pty=output.extend))
            except CommandExitException as e:
                result.append(e)

        t = threading.Thread(target=reader)
        t.start()
        self.sbx.pty.send_stdin(term.pid, b"echo $((6*7))\n")
        wait_for(lambda: b"42" in output, "pty output 42")
        self.sbx.pty.resize(term.pid, PtySize(rows=30, cols=100))
        self.sbx.pty.send_stdin(term.pid, b"stty size\n")
        wait_for(lambda: b"30 100" in output, "the resized terminal")
        self.sbx.pty.send_stdin(term.pid, b"exit\n")
        t.join(20)
        self.assertEqual(result[0].exit_code, 0)

        other = self.sbx.pty.create(PtySize(rows=24, cols=80))
        self.assertTrue(self.sbx.pty.kill(other.pid))
        with self.assertRaises(CommandExitException):
            other.wait()

    def test_pty_connect_is_a_clear_error(self):
        # hutch hangs a terminal up with the stream that made it, so there is
        # nothing to re-attach to: envd answers `unimplemented`, which the SDK
        # raises as a SandboxException naming it.
        term = self.sbx.pty.create(PtySize(rows=24, cols=80))
        try:
            with self.assertRaises(SandboxException) as cm:
                self.sbx.pty.connect(term.pid)
            self.assertIn("unimplemented", str(cm.exception).lower())
        finally:
            self.sbx.pty.kill(term.pid)

    # --- files ---------------------------------------------------------

    def test_files_text_bytes_stream(self):
        info = self.sbx.files.write("/home/user/hello.txt", "hello e2b\n")
        self.assertEqual(info.path, "/home/user/hello.txt")
        self.assertEqual(info.name, "hello.txt")
        self.assertEqual(self.sbx.files.read("/home/user/hello.txt"), "hello e2b\n")
        owner = self.sbx.commands.run("stat -c %U /home/user/hello.txt").stdout
        self.assertEqual(owner, "user\n")
        self.sbx.files.write("/home/user/bin.dat", b"\x00\x01\xff")
        self.assertEqual(bytes(self.sbx.files.read("/home/user/bin.dat", format="bytes")), b"\x00\x01\xff")
        chunks = list(self.sbx.files.read("/home/user/hello.txt", format="stream"))
        self.assertEqual(b"".join(chunks), b"hello e2b\n")
        # A file object and an iterable are streamed (octet-stream uploads).
        self.sbx.files.write("/home/user/fileobj.txt", io.BytesIO(b"from a file object"))
        self.assertEqual(self.sbx.files.read("/home/user/fileobj.txt"), "from a file object")
        self.sbx.files.write("/home/user/iter.txt", iter([b"a", b"b", b"c"]))
        self.assertEqual(self.sbx.files.read("/home/user/iter.txt"), "abc")
        # Parents are made; root writes as root.
        self.sbx.files.write("/home/user/new/dir/f.txt", "deep")
        self.assertEqual(self.sbx.files.read("/home/user/new/dir/f.txt"), "deep")
        self.sbx.files.write("/root/r.txt", "root's", user="root")
        self.assertEqual(self.sbx.files.read("/root/r.txt", user="root"), "root's")
        # Several files at once, relative paths from the user's home; gzip.
        self.sbx.files.write_files([WriteEntry(path="multi/a.txt", data="A"), WriteEntry(path="multi/b.txt", data="B")])
        self.assertEqual(self.sbx.files.read("/home/user/multi/b.txt"), "B")
        self.sbx.files.write("/home/user/gz.txt", "zipped\n", gzip=True)
        self.assertEqual(self.sbx.files.read("/home/user/gz.txt", gzip=True), "zipped\n")

    def test_large_file_round_trip(self):
        big = os.urandom(20 * 1024 * 1024)
        self.sbx.files.write("/home/user/big.bin", big)
        back = self.sbx.files.read("/home/user/big.bin", format="bytes")
        self.assertEqual(len(back), len(big))
        self.assertEqual(sha256(back), sha256(big))
        inside = self.sbx.commands.run("sha256sum /home/user/big.bin").stdout.split()[0]
        self.assertEqual(inside, sha256(big))
        h = hashlib.sha256()
        n = 0
        for c in self.sbx.files.read("/home/user/big.bin", format="stream"):
            h.update(c)
            n += len(c)
        self.assertEqual((n, h.hexdigest()), (len(big), sha256(big)))
        self.sbx.files.remove("/home/user/big.bin")

    def test_files_list_exists_info_make_dir_rename_remove(self):
        fs = self.sbx.files
        self.assertTrue(fs.make_dir("/home/user/tree/a/b"))
        self.assertFalse(fs.make_dir("/home/user/tree/a/b"), "make_dir of an existing dir")
        fs.write("/home/user/tree/top.txt", "12345")
        fs.write("/home/user/tree/a/b/deep.txt", "x")
        self.assertEqual(sorted(e.name for e in fs.list("/home/user/tree")), ["a", "top.txt"])
        two = sorted(e.path for e in fs.list("/home/user/tree", depth=2))
        self.assertEqual(two, ["/home/user/tree/a", "/home/user/tree/a/b", "/home/user/tree/top.txt"])
        three = fs.list("/home/user/tree", depth=3)
        self.assertIn("/home/user/tree/a/b/deep.txt", [e.path for e in three])

        self.assertTrue(fs.exists("/home/user/tree/top.txt"))
        self.assertFalse(fs.exists("/home/user/tree/nope.txt"))
        info = fs.get_info("/home/user/tree/top.txt")
        self.assertEqual((info.name, info.type, info.size), ("top.txt", FileType.FILE, 5))
        self.assertEqual(info.path, "/home/user/tree/top.txt")
        self.assertEqual(info.permissions, "-rw-r--r--")
        self.assertIsNotNone(info.modified_time)
        self.assertEqual(fs.get_info("/home/user/tree/a").type, FileType.DIR)

        moved = fs.rename("/home/user/tree/top.txt", "/home/user/tree/renamed.txt")
        self.assertEqual(moved.path, "/home/user/tree/renamed.txt")
        self.assertFalse(fs.exists("/home/user/tree/top.txt"))
        self.assertEqual(fs.read("/home/user/tree/renamed.txt"), "12345")

        fs.remove("/home/user/tree")
        self.assertFalse(fs.exists("/home/user/tree"))
        fs.remove("/home/user/tree")  # gone already: no error, as E2B's envd
        with self.assertRaises(FileNotFoundException):
            fs.read("/home/user/tree/renamed.txt")
        with self.assertRaises(NotFoundException):
            fs.get_info("/home/user/tree")
        with self.assertRaises(NotFoundException):
            fs.list("/home/user/tree")

    def test_watch_dir_events(self):
        self.sbx.files.make_dir("/home/user/watched")
        handle = self.sbx.files.watch_dir("/home/user/watched")
        try:
            self.sbx.files.write("/home/user/watched/new.txt", "content")
            events = []

            def seen():
                events.extend(handle.get_new_events())
                kinds = {e.type for e in events if e.name == "new.txt"}
                return {FilesystemEventType.CREATE, FilesystemEventType.WRITE} <= kinds

            wait_for(seen, "create and write events")
            self.sbx.files.remove("/home/user/watched/new.txt")
            wait_for(
                lambda: (
                    events.extend(handle.get_new_events()) or any(e.type == FilesystemEventType.REMOVE for e in events)
                ),
                "a remove event",
            )
        finally:
            handle.stop()

    def test_watch_dir_recursive(self):
        self.sbx.files.make_dir("/home/user/rw/sub")
        handle = self.sbx.files.watch_dir("/home/user/rw", recursive=True)
        try:
            self.sbx.files.write("/home/user/rw/sub/inner.txt", "x")
            events = []
            wait_for(
                lambda: (
                    events.extend(handle.get_new_events())
                    or any(e.name == "sub/inner.txt" and e.type == FilesystemEventType.CREATE for e in events)
                ),
                "a create event named relative to the watched dir",
            )
        finally:
            handle.stop()

    # --- ports -----------------------------------------------------------

    def test_get_host_reaches_a_server_in_the_sandbox(self):
        self.sbx.files.write("/home/user/www/served.txt", "served from the sandbox")
        server = self.sbx.commands.run(
            "python3 -m http.server 8000 --bind 127.0.0.1", background=True, cwd="/home/user/www"
        )
        try:
            host = self.sbx.get_host(8000)
            self.assertEqual(host, f"8000-{self.sbx.sandbox_id}.{self.sbx.sandbox_domain}")
            token = self.sbx.traffic_access_token
            headers = {"e2b-traffic-access-token": token} if token else {"X-Access-Token": self.sbx._envd_access_token}

            def served():
                status, body = via_host(host, "/served.txt", headers)
                return None if status == 502 else (status, body)

            self.assertEqual(wait_for(served, "the server in the sandbox"), (200, "served from the sandbox"))
            self.assertEqual(via_host(host, "/served.txt", {})[0], 401, "no token, no entry")
        finally:
            server.kill()


class ErrorsTest(unittest.TestCase):
    def test_unknown_ids_are_not_found(self):
        with self.assertRaises(NotFoundException):
            Sandbox.connect("sb_doesnotexist")
        with self.assertRaises(NotFoundException):
            Sandbox.get_info("sb_doesnotexist")
        with self.assertRaises(NotFoundException):
            Sandbox.set_timeout("sb_doesnotexist", 60)

    def test_bad_key_is_authentication_exception(self):
        with self.assertRaises(AuthenticationException):
            Sandbox.create(api_key="e2b_00")
        with self.assertRaises(AuthenticationException):
            Sandbox.list(api_key="e2b_00").next_items()

    def test_unknown_template_is_an_error(self):
        with self.assertRaises(SandboxException) as cm:
            Sandbox.create("no-such-template-py")
        self.assertIn("no-such-template-py", str(cm.exception))

    def test_not_offered_features_answer_not_supported(self):
        # A memory snapshot is an E2B feature hutch does not serve: a clear
        # 501 (file snapshots work: test_e2b_control.py).
        s = Sandbox.create(timeout=60)
        try:
            with self.assertRaises(SandboxException) as cm:
                s.create_snapshot(mode="full")
            self.assertIn("not supported", str(cm.exception).lower())
        finally:
            s.kill()


class ConnectionTest(unittest.TestCase):
    """How the SDK finds the API and envd, as options rather than env."""

    def test_options_instead_of_environment(self):
        opts = {
            "api_url": os.environ["E2B_API_URL"],
            "sandbox_url": os.environ["E2B_SANDBOX_URL"],
            "api_key": os.environ["E2B_API_KEY"],
        }
        saved = {k: os.environ.pop(k) for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY")}
        try:
            s = Sandbox.create(timeout=60, **opts)
            try:
                self.assertEqual(s.commands.run("echo via-options").stdout, "via-options\n")
                again = Sandbox.connect(s.sandbox_id, **opts)
                self.assertEqual(again.files.write("/tmp/o.txt", "o").path, "/tmp/o.txt")
            finally:
                Sandbox.kill(s.sandbox_id, **opts)
        finally:
            os.environ.update(saved)

    def test_domain_names_hosts_only(self):
        # E2B_DOMAIN is only what get_host() names (the API and envd URLs
        # above take precedence); hutchd answers no `domain` without --domain.
        s = Sandbox.create(timeout=60, domain="sandboxes.example.internal")
        try:
            self.assertEqual(s.get_host(3000), f"3000-{s.sandbox_id}.sandboxes.example.internal")
            self.assertEqual(s.commands.run("echo ok").stdout, "ok\n")
        finally:
            s.kill()

    def test_hutch_key_as_given(self):
        # 2.63 no longer checks the key's form: hutch's own `hk_<hex>` works
        # as well as the `e2b_<hex>` run.sh exports.
        hk = "hk_" + os.environ["E2B_API_KEY"].removeprefix("e2b_")
        s = Sandbox.create(timeout=60, api_key=hk)
        try:
            self.assertIn(s.sandbox_id, [x.sandbox_id for x in Sandbox.list(api_key=hk).next_items()])
            self.assertEqual(s.commands.run("echo hk").stdout, "hk\n")
        finally:
            Sandbox.kill(s.sandbox_id, api_key=hk)

    def test_http1_pinned(self):
        s = Sandbox.create(timeout=60, http_version="1.1")
        try:
            self.assertEqual(s.commands.run("echo h1").stdout, "h1\n")
            self.assertEqual(s.files.read("/etc/hostname").strip() != "", True)
        finally:
            s.kill()


class AsyncSandboxTest(unittest.IsolatedAsyncioTestCase):
    """AsyncSandbox: one sandbox per case (its HTTP clients belong to the
    event loop each IsolatedAsyncioTestCase case runs in)."""

    async def asyncSetUp(self):
        self.sbx = await AsyncSandbox.create(
            timeout=SANDBOX_TIMEOUT_S, metadata={"suite": "py-async"}, envs={"HUTCH_E2B": "async"}
        )

    async def asyncTearDown(self):
        await self.sbx.kill()

    async def test_lifecycle(self):
        self.assertTrue(await self.sbx.is_running())
        info = await self.sbx.get_info()
        self.assertEqual(info.metadata, {"suite": "py-async"})
        await self.sbx.set_timeout(1200)
        later = await self.sbx.get_info()
        self.assertGreater((later.end_at - later.started_at).total_seconds(), 1000)
        same = await AsyncSandbox.connect(self.sbx.sandbox_id)
        self.assertEqual((await same.commands.run("echo $HUTCH_E2B")).stdout, "async\n")
        pager = AsyncSandbox.list(query=SandboxQuery(metadata={"suite": "py-async"}))
        ids = [s.sandbox_id for s in await pager.next_items()]
        self.assertIn(self.sbx.sandbox_id, ids)
        with self.assertRaises(NotFoundException):
            await AsyncSandbox.connect("sb_doesnotexist")
        self.assertFalse(await AsyncSandbox.kill("sb_doesnotexist"))
        with self.assertRaises(AuthenticationException):
            await AsyncSandbox.create(api_key="e2b_00")

    async def test_commands(self):
        r = await self.sbx.commands.run("echo hi; whoami")
        self.assertEqual(r.stdout, "hi\nuser\n")
        r = await self.sbx.commands.run("pwd; echo $X", cwd="/tmp", envs={"X": "y"}, user="root")
        self.assertEqual(r.stdout, "/tmp\ny\n")
        with self.assertRaises(CommandExitException) as cm:
            await self.sbx.commands.run("echo bad >&2; exit 4")
        self.assertEqual((cm.exception.exit_code, cm.exception.stderr), (4, "bad\n"))
        out, err = [], []

        async def on_err(s):
            err.append(s)

        r = await self.sbx.commands.run("echo a; echo b >&2", on_stdout=out.append, on_stderr=on_err)
        self.assertEqual(("".join(out), "".join(err)), ("a\n", "b\n"))
        with self.assertRaises(TimeoutException):
            await self.sbx.commands.run("sleep 30", timeout=2)

        h = await self.sbx.commands.run("read l; echo got:$l", background=True, stdin=True)
        procs = await self.sbx.commands.list()
        self.assertIn(h.pid, [p.pid for p in procs])
        await h.disconnect()
        streamed = []
        again = await self.sbx.commands.connect(h.pid, on_stdout=streamed.append)
        await self.sbx.commands.send_stdin(h.pid, "there\n")
        r = await again.wait()
        self.assertEqual((r.stdout, "".join(streamed)), ("got:there\n", "got:there\n"))
        sleeper = await self.sbx.commands.run("sleep 60", background=True)
        self.assertTrue(await sleeper.kill())
        with self.assertRaises(CommandExitException):
            await sleeper.wait()
        self.assertFalse(await self.sbx.commands.kill(sleeper.pid))

    async def test_pty(self):
        output = bytearray()
        term = await self.sbx.pty.create(PtySize(rows=24, cols=80), on_data=output.extend)
        await self.sbx.pty.send_stdin(term.pid, b"echo $((6*7))\n")

        async def has(b):
            return b in output

        await async_wait_for(lambda: has(b"42"), "pty output 42")
        await self.sbx.pty.resize(term.pid, PtySize(rows=33, cols=111))
        await self.sbx.pty.send_stdin(term.pid, b"stty size\n")
        await async_wait_for(lambda: has(b"33 111"), "the resized terminal")
        self.assertTrue(await self.sbx.pty.kill(term.pid))
        with self.assertRaises(CommandExitException):
            await term.wait()

    async def test_files_and_watch(self):
        fs = self.sbx.files
        await fs.make_dir("/home/user/aw")
        events = []
        handle = await fs.watch_dir("/home/user/aw", on_event=events.append)
        try:
            info = await fs.write("/home/user/aw/a.txt", "async text")
            self.assertEqual(info.path, "/home/user/aw/a.txt")

            async def created():
                return any(e.name == "a.txt" and e.type == FilesystemEventType.CREATE for e in events)

            await async_wait_for(created, "a create event over WatchDir")
        finally:
            await handle.stop()
        self.assertEqual(await fs.read("/home/user/aw/a.txt"), "async text")
        data = os.urandom(3 * 1024 * 1024)
        await fs.write("/home/user/aw/b.bin", data)
        self.assertEqual(sha256(bytes(await fs.read("/home/user/aw/b.bin", format="bytes"))), sha256(data))
        stream = await fs.read("/home/user/aw/b.bin", format="stream")
        got = b"".join([c async for c in stream])
        self.assertEqual(sha256(got), sha256(data))
        self.assertEqual(sorted(e.name for e in await fs.list("/home/user/aw")), ["a.txt", "b.bin"])
        self.assertTrue(await fs.exists("/home/user/aw/b.bin"))
        self.assertEqual((await fs.get_info("/home/user/aw/b.bin")).size, len(data))
        await fs.rename("/home/user/aw/b.bin", "/home/user/aw/c.bin")
        self.assertFalse(await fs.exists("/home/user/aw/b.bin"))
        await fs.remove("/home/user/aw")
        self.assertFalse(await fs.exists("/home/user/aw"))
        with self.assertRaises(FileNotFoundException):
            await fs.read("/home/user/aw/a.txt")


if __name__ == "__main__":
    unittest.main()
