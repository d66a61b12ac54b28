"""The PyPI `opensandbox` SDK, unmodified, against a live hutchd.

Configured by OPEN_SANDBOX_DOMAIN (<addr>/opensandbox: the SDK keeps the
path, its lifecycle base is `{protocol}://{domain}/v1`) and
OPEN_SANDBOX_API_KEY (`run.sh base` sets them). execd is reached through the
server-proxy endpoint hutch hands out for port 44772. The cases follow the
npm suite (../opensandbox/opensandbox_compat.test.mjs) and the SDK's
README: the sync `SandboxSync` carries the suite, the async `Sandbox` runs
the same flows on its own sandbox.
"""

import hashlib
import io
import os
import time
import unittest
import uuid
from datetime import datetime, timedelta, timezone

from opensandbox import Sandbox, SandboxManager, SandboxManagerSync, SandboxSync
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.models.execd import ExecutionHandlers, RunCommandOpts
from opensandbox.models.execd_sync import ExecutionHandlersSync
from opensandbox.models.filesystem import (
    ContentReplaceEntry,
    DirectoryListEntry,
    MoveEntry,
    SearchEntry,
    SetPermissionEntry,
    WriteEntry,
)
from opensandbox.models.sandboxes import SandboxFilter
from support import async_wait_for, sha256, wait_for

# ubuntu:24.04 is in hutch's default image table (-> template base).
IMAGE = "ubuntu:24.04"
LIFETIME = timedelta(minutes=10)
RUN = uuid.uuid4().hex[:12]


def stdout(ex):
    return [m.text for m in ex.logs.stdout]


def stderr(ex):
    return [m.text for m in ex.logs.stderr]


class SyncSandboxTest(unittest.TestCase):
    sbx: SandboxSync

    @classmethod
    def setUpClass(cls):
        cls.sbx = SandboxSync.create(
            IMAGE,
            timeout=LIFETIME,
            metadata={"suite": RUN, "role": "main"},
            env={"HUTCH_OSB": "yes"},
        )

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()
        cls.sbx.close()

    # --- commands ------------------------------------------------------

    def test_run_echo(self):
        ex = self.sbx.commands.run("echo Hello; echo $HUTCH_OSB")
        self.assertEqual(stdout(ex), ["Hello", "yes"])
        self.assertEqual(ex.exit_code, 0)
        self.assertIsNotNone(ex.complete)
        self.assertTrue(ex.id)

    def test_failing_command(self):
        ex = self.sbx.commands.run("echo oops >&2; exit 3")
        self.assertEqual(ex.exit_code, 3)
        self.assertEqual(stderr(ex), ["oops"])
        self.assertEqual(ex.error.value, "3")

    def test_options_cwd_envs_timeout(self):
        ex = self.sbx.commands.run(
            "pwd; echo $GREETING; whoami",
            opts=RunCommandOpts(working_directory="/tmp", envs={"GREETING": "hi"}),
        )
        self.assertEqual(stdout(ex), ["/tmp", "hi", "root"])
        t0 = time.monotonic()
        ex = self.sbx.commands.run("sleep 30", opts=RunCommandOpts(timeout=timedelta(seconds=1)))
        self.assertLess(time.monotonic() - t0, 15)
        self.assertNotEqual(ex.exit_code, 0)

    def test_argv_command(self):
        ex = self.sbx.commands.run(["/bin/echo", "a b", "$HOME"])
        self.assertEqual(stdout(ex), ["a b $HOME"])
        self.assertEqual(ex.exit_code, 0)

    def test_streaming_handlers(self):
        seen, errs = [], []
        ex = self.sbx.commands.run(
            "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo e >&2",
            handlers=ExecutionHandlersSync(
                on_stdout=lambda m: seen.append(m.text), on_stderr=lambda m: errs.append(m.text)
            ),
        )
        self.assertEqual(seen, ["line1", "line2", "line3"])
        self.assertEqual(errs, ["e"])
        self.assertEqual(ex.exit_code, 0)

    def test_background_status_logs_interrupt(self):
        ex = self.sbx.commands.run("echo bg-start; sleep 60; echo never", opts=RunCommandOpts(background=True))
        self.assertTrue(ex.id)
        st = self.sbx.commands.get_command_status(ex.id)
        self.assertEqual(st.id, ex.id)
        self.assertTrue(st.running)

        def logged():
            lg = self.sbx.commands.get_background_command_logs(ex.id)
            return lg if "bg-start" in lg.content else None

        logs = wait_for(logged, "background output")
        self.assertEqual(logs.content, "bg-start\n")
        self.assertEqual(logs.cursor, len("bg-start\n"))
        self.assertEqual(self.sbx.commands.get_background_command_logs(ex.id, logs.cursor).content, "")
        self.sbx.commands.interrupt(ex.id)

        def ended():
            s = self.sbx.commands.get_command_status(ex.id)
            return None if s.running else s

        done = wait_for(ended, "the interrupted command to end")
        self.assertNotEqual(done.exit_code, 0)
        self.assertIsNotNone(done.finished_at)

    def test_sessions(self):
        sid = self.sbx.commands.create_session()
        self.assertEqual(self.sbx.commands.run_in_session(sid, "cd /tmp; export X=1").exit_code, 0)
        second = self.sbx.commands.run_in_session(sid, "echo $X; pwd")
        self.assertEqual(stdout(second), ["1", "/tmp"])
        third = self.sbx.commands.run_in_session(sid, "printf abc; echo err >&2; false")
        self.assertEqual((stdout(third), stderr(third), third.exit_code), (["abc"], ["err"], 1))
        other = self.sbx.commands.create_session(working_directory="/usr")
        self.assertEqual(stdout(self.sbx.commands.run_in_session(other, "pwd")), ["/usr"])
        self.sbx.commands.delete_session(other)
        with self.assertRaises(SandboxException):
            self.sbx.commands.run_in_session(other, "pwd")
        self.sbx.commands.delete_session(sid)

    def test_set_env_persists_for_later_commands_and_sessions(self):
        # The SDK appends to the file $EXECD_ENVS names; hutch loads it for
        # every later command and session (the request's envs win).
        self.sbx.commands.set_env("PY_SET", "v 1")
        self.sbx.commands.set_env("PY_QUOTE", "it's quoted")
        ex = self.sbx.commands.run('echo "$PY_SET|$PY_QUOTE"; python3 -c "import os; print(os.environ[\'PY_SET\'])"')
        self.assertEqual(stdout(ex), ["v 1|it's quoted", "v 1"])
        over = self.sbx.commands.run("echo $PY_SET", opts=RunCommandOpts(envs={"PY_SET": "request"}))
        self.assertEqual(stdout(over), ["request"])
        self.sbx.commands.set_env("PY_SET", "later")
        sid = self.sbx.commands.create_session()
        self.assertEqual(stdout(self.sbx.commands.run_in_session(sid, "echo $PY_SET")), ["later"])
        self.sbx.commands.delete_session(sid)

    # --- files ---------------------------------------------------------

    def test_files_text_range_info(self):
        fs = self.sbx.files
        fs.write_files([WriteEntry(path="/tmp/osb/hello.txt", data="hello world\n", mode=644)])
        self.assertEqual(fs.read_file("/tmp/osb/hello.txt"), "hello world\n")
        self.assertEqual(fs.read_file("/tmp/osb/hello.txt", range_header="bytes=6-10"), "world")
        info = fs.get_file_info(["/tmp/osb/hello.txt", "/tmp/osb"])
        f = info["/tmp/osb/hello.txt"]
        self.assertEqual((f.entry_type, f.size, f.mode, f.owner, f.group), ("file", 12, 644, "root", "root"))
        self.assertIsInstance(f.modified_at, datetime)
        self.assertEqual(info["/tmp/osb"].entry_type, "directory")
        fs.write_file("/tmp/osb/one.txt", "single")
        self.assertEqual(fs.read_file("/tmp/osb/one.txt"), "single")

    def test_read_lines_offset_limit(self):
        self.sbx.files.write_file("/tmp/osb/lines.txt", "l1\nl2\nl3\nl4\n")
        self.assertEqual(self.sbx.files.read_file("/tmp/osb/lines.txt", offset=2, limit=2), "l2\nl3\n")
        self.assertEqual(self.sbx.files.read_file("/tmp/osb/lines.txt", offset=4), "l4\n")
        self.assertEqual(self.sbx.files.read_file("/tmp/osb/lines.txt", limit=1), "l1\n")
        self.assertEqual(bytes(self.sbx.files.read_bytes("/tmp/osb/lines.txt", offset=3, limit=5)), b"l3\nl4\n")

    def test_large_binary_round_trip(self):
        data = os.urandom(20 << 20)
        self.sbx.files.write_files([WriteEntry(path="/tmp/osb/blob.bin", data=data)])
        back = self.sbx.files.read_bytes("/tmp/osb/blob.bin")
        self.assertEqual((len(back), sha256(back)), (len(data), sha256(data)))
        inside = self.sbx.commands.run("sha256sum /tmp/osb/blob.bin")
        self.assertEqual(stdout(inside)[0].split()[0], sha256(data))
        # A file object takes the SDK's streamed upload.
        self.sbx.files.write_files([WriteEntry(path="/tmp/osb/blob2.bin", data=io.BytesIO(data))])
        h, n = hashlib.sha256(), 0
        for c in self.sbx.files.read_bytes_stream("/tmp/osb/blob2.bin"):
            h.update(c)
            n += len(c)
        self.assertEqual((n, h.hexdigest()), (len(data), sha256(data)))

    def test_dirs_list_search_move_permissions_replace_delete(self):
        fs = self.sbx.files
        fs.create_directories([WriteEntry(path="/tmp/tree/sub", mode=700)])
        fs.write_files(
            [
                WriteEntry(path="/tmp/tree/a.txt", data="host=localhost port=1 localhost\n"),
                WriteEntry(path="/tmp/tree/sub/b.txt", data="b"),
                WriteEntry(path="/tmp/tree/sub/c.log", data="c"),
            ]
        )
        self.assertEqual(fs.get_file_info(["/tmp/tree/sub"])["/tmp/tree/sub"].mode, 700)
        top = fs.list_directory(DirectoryListEntry(path="/tmp/tree", depth=1))
        self.assertEqual(sorted(e.path for e in top), ["/tmp/tree/a.txt", "/tmp/tree/sub"])
        self.assertEqual(len(fs.list_directory(DirectoryListEntry(path="/tmp/tree", depth=2))), 4)
        txt = fs.search(SearchEntry(path="/tmp/tree", pattern="*.txt"))
        self.assertEqual(sorted(e.path for e in txt), ["/tmp/tree/a.txt", "/tmp/tree/sub/b.txt"])

        fs.move_files([MoveEntry(src="/tmp/tree/sub/c.log", dest="/tmp/tree/moved/c.log")])
        self.assertEqual(fs.read_file("/tmp/tree/moved/c.log"), "c")
        with self.assertRaises(SandboxException):
            fs.get_file_info(["/tmp/tree/sub/c.log"])

        fs.set_permissions([SetPermissionEntry(path="/tmp/tree/a.txt", mode=755)])
        self.assertEqual(fs.get_file_info(["/tmp/tree/a.txt"])["/tmp/tree/a.txt"].mode, 755)
        self.assertEqual(stdout(self.sbx.commands.run("stat -c '%a %U' /tmp/tree/a.txt")), ["755 root"])

        fs.replace_contents(
            [ContentReplaceEntry(path="/tmp/tree/a.txt", old_content="localhost", new_content="0.0.0.0")]
        )
        self.assertEqual(fs.read_file("/tmp/tree/a.txt"), "host=0.0.0.0 port=1 0.0.0.0\n")
        counts = fs.replace_contents_detailed(
            [ContentReplaceEntry(path="/tmp/tree/a.txt", old_content="0.0.0.0", new_content="h")]
        )
        self.assertEqual([(c.path, c.replaced_count) for c in counts], [("/tmp/tree/a.txt", 2)])

        fs.delete_files(["/tmp/tree/a.txt"])
        with self.assertRaises(SandboxException):
            fs.get_file_info(["/tmp/tree/a.txt"])
        fs.delete_directories(["/tmp/tree"])
        with self.assertRaises(SandboxException):
            fs.list_directory(DirectoryListEntry(path="/tmp/tree"))

    def test_files_with_identity_is_not_supported(self):
        # Files with an explicit identity go to execd's
        # /v1/filesystem/{uid}/{gid}/..., which hutch answers with a clear
        # NOT_SUPPORTED saying so (its execd file calls run as root).
        fs = self.sbx.files_with_identity(1000, 1000)
        with self.assertRaises(SandboxApiException) as cm:
            fs.write_file("/tmp/osb/ident.txt", "mine")
        self.assertEqual(cm.exception.status_code, 501)
        self.assertIn("HUTCH::NOT_SUPPORTED", str(cm.exception))
        self.assertIn("explicit identity", str(cm.exception))

    # --- lifecycle -----------------------------------------------------

    def test_metrics(self):
        m = self.sbx.get_metrics()
        self.assertGreater(m.cpu_count, 0)
        self.assertGreater(m.memory_total_in_mib, 0)
        self.assertTrue(0 < m.memory_used_in_mib <= m.memory_total_in_mib)
        self.assertTrue(0 <= m.cpu_used_percentage <= 100)
        self.assertGreater(m.timestamp, 0)

    def test_info_renew_endpoints(self):
        info = self.sbx.get_info()
        self.assertEqual(info.id, self.sbx.id)
        self.assertEqual(info.status.state, "Running")
        self.assertEqual(info.metadata["suite"], RUN)
        before = info.expires_at
        r = self.sbx.renew(timedelta(minutes=30))
        self.assertGreater(r.expires_at, before)
        self.assertEqual(self.sbx.get_info().expires_at, r.expires_at)
        ep = self.sbx.get_endpoint(44772)
        self.assertTrue(ep.endpoint.endswith(f"/sandboxes/{self.sbx.id}/proxy/44772"), ep.endpoint)
        self.assertIn("X-EXECD-ACCESS-TOKEN", ep.headers)
        with self.assertRaises(SandboxApiException) as cm:
            self.sbx.get_endpoint(8000)
        self.assertIn("NOT_SUPPORTED", str(cm.exception))

    def test_patch_metadata(self):
        info = self.sbx.patch_metadata({"extra": "1"})
        self.assertEqual(info.metadata["extra"], "1")
        info = self.sbx.patch_metadata({"extra": None})
        self.assertNotIn("extra", info.metadata)

    def test_manager_list_filter_and_kill(self):
        other = SandboxSync.create("python:3.12", metadata={"suite": RUN, "role": "other"})
        mgr = SandboxManagerSync.create()
        try:
            mine = mgr.list_sandbox_infos(SandboxFilter(metadata={"suite": RUN}))
            self.assertIn(other.id, [s.id for s in mine.sandbox_infos])
            self.assertIn(self.sbx.id, [s.id for s in mine.sandbox_infos])
            main = mgr.list_sandbox_infos(SandboxFilter(metadata={"suite": RUN, "role": "main"}))
            self.assertEqual([s.id for s in main.sandbox_infos], [self.sbx.id])
            paged = mgr.list_sandbox_infos(SandboxFilter(metadata={"suite": RUN}, page_size=1, page=1))
            self.assertEqual(len(paged.sandbox_infos), 1)
            self.assertTrue(paged.pagination.has_next_page)
            mgr.kill_sandbox(other.id)
            left = mgr.list_sandbox_infos(SandboxFilter(metadata={"suite": RUN}, states=["Running"]))
            self.assertNotIn(other.id, [s.id for s in left.sandbox_infos])
        finally:
            try:
                other.kill()
            except SandboxException:
                pass
            other.close()
            mgr.close()

    def test_pause_resume_connect(self):
        s = SandboxSync.create(IMAGE, metadata={"suite": RUN, "role": "pause"})
        try:
            s.files.write_file("/tmp/keep.txt", "kept")
            s.pause()
            self.assertEqual(s.get_info().status.state, "Paused")
            back = SandboxSync.resume(s.id)
            self.assertEqual(back.get_info().status.state, "Running")
            self.assertEqual(back.files.read_file("/tmp/keep.txt"), "kept")
            again = SandboxSync.connect(s.id)
            self.assertEqual(stdout(again.commands.run("echo back")), ["back"])
            again.close()
            back.close()
        finally:
            s.kill()
            s.close()

    def test_kill_then_gone(self):
        victim = SandboxSync.create(IMAGE, metadata={"suite": RUN, "role": "victim"})
        victim.kill()
        with self.assertRaises(SandboxApiException) as cm:
            victim.get_info()
        self.assertEqual(cm.exception.status_code, 404)
        victim.close()

    def test_unknown_image_names_the_flag(self):
        with self.assertRaises(SandboxException) as cm:
            SandboxSync.create("no-such/image:1")
        self.assertIn("--opensandbox-images", str(cm.exception))

    def test_manual_cleanup_sandbox(self):
        # timeout=None asks for no expiry (OpenSandbox's manual cleanup);
        # every hutch sandbox has one, so it gets the server's longest
        # (--max-ttl, 24 h by default): a documented difference.
        s = SandboxSync.create(IMAGE, timeout=None, metadata={"suite": RUN, "role": "manual"})
        try:
            left = s.get_info().expires_at - datetime.now(timezone.utc)
            self.assertAlmostEqual(left.total_seconds(), 24 * 3600, delta=120)
        finally:
            s.kill()
            s.close()


class AsyncSandboxTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.sbx = await Sandbox.create(IMAGE, timeout=LIFETIME, metadata={"suite": RUN, "role": "async"})

    async def asyncTearDown(self):
        await self.sbx.kill()
        await self.sbx.close()

    async def test_commands(self):
        ex = await self.sbx.commands.run("echo Hello")
        self.assertEqual((stdout(ex), ex.exit_code), (["Hello"], 0))
        ex = await self.sbx.commands.run("exit 5")
        self.assertEqual(ex.exit_code, 5)
        seen = []

        async def on_stdout(m):
            seen.append(m.text)

        await self.sbx.commands.run("echo a; echo b", handlers=ExecutionHandlers(on_stdout=on_stdout))
        self.assertEqual(seen, ["a", "b"])
        bg = await self.sbx.commands.run("echo started; sleep 60", opts=RunCommandOpts(background=True))
        self.assertTrue((await self.sbx.commands.get_command_status(bg.id)).running)

        async def logged():
            logs = await self.sbx.commands.get_background_command_logs(bg.id)
            return logs if logs.content else None

        self.assertEqual((await async_wait_for(logged, "background output")).content, "started\n")
        await self.sbx.commands.interrupt(bg.id)

        async def ended():
            st = await self.sbx.commands.get_command_status(bg.id)
            return None if st.running else st

        self.assertNotEqual((await async_wait_for(ended, "the interrupted command to end")).exit_code, 0)
        sid = await self.sbx.commands.create_session(working_directory="/tmp")
        await self.sbx.commands.run_in_session(sid, "export Y=2")
        ex = await self.sbx.commands.run_in_session(sid, "echo $Y; pwd")
        self.assertEqual(stdout(ex), ["2", "/tmp"])
        await self.sbx.commands.delete_session(sid)

    async def test_files(self):
        fs = self.sbx.files
        await fs.write_files([WriteEntry(path="/tmp/a/x.txt", data="async")])
        self.assertEqual(await fs.read_file("/tmp/a/x.txt"), "async")
        data = os.urandom(2 << 20)
        await fs.write_file("/tmp/a/y.bin", data)
        self.assertEqual(sha256(await fs.read_bytes("/tmp/a/y.bin")), sha256(data))
        chunks = [c async for c in await fs.read_bytes_stream("/tmp/a/y.bin")]
        self.assertEqual(sha256(b"".join(chunks)), sha256(data))
        info = await fs.get_file_info(["/tmp/a/y.bin"])
        self.assertEqual(info["/tmp/a/y.bin"].size, len(data))
        listed = await fs.list_directory(DirectoryListEntry(path="/tmp/a"))
        self.assertEqual(sorted(e.path for e in listed), ["/tmp/a/x.txt", "/tmp/a/y.bin"])
        await fs.delete_files(["/tmp/a/x.txt"])
        with self.assertRaises(SandboxException):
            await fs.get_file_info(["/tmp/a/x.txt"])
        await fs.delete_directories(["/tmp/a"])

    async def test_lifecycle(self):
        m = await self.sbx.get_metrics()
        self.assertGreater(m.memory_used_in_mib, 0)
        r = await self.sbx.renew(timedelta(minutes=20))
        self.assertGreater(r.expires_at, datetime.now(timezone.utc))
        info = await self.sbx.get_info()
        self.assertEqual(info.metadata["role"], "async")
        mgr = await SandboxManager.create()
        try:
            got = await mgr.list_sandbox_infos(SandboxFilter(metadata={"suite": RUN, "role": "async"}))
            self.assertEqual([s.id for s in got.sandbox_infos], [self.sbx.id])
        finally:
            await mgr.close()
        await self.sbx.pause()
        self.assertEqual((await self.sbx.get_info()).status.state, "Paused")
        back = await Sandbox.resume(self.sbx.id)
        self.assertEqual(stdout(await back.commands.run("echo resumed")), ["resumed"])
        await back.close()
        same = await Sandbox.connect(self.sbx.id)
        self.assertTrue(await same.is_healthy())
        await same.close()


if __name__ == "__main__":
    unittest.main()
