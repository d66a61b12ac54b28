"""The PyPI `e2b` SDK's control-plane features beyond the basics, unmodified,
against a live hutchd: snapshots, fork, network updates, signed file URLs
and keep-alive refreshes, each mapped onto hutch's own (docs/compat-e2b.md).

Configured like test_e2b_sdk.py (`run.sh base test_e2b_control`). When
run.sh built the egress tests' outside world (HUTCH_WORLD, from
hutch-test-world: allowed.test and denied.test servers on non-public
addresses), the network cases also check what a sandbox can reach;
without it they check the policy hutch holds (through /v1) only.
"""

import datetime
import http.client
import json
import os
import unittest
import uuid
from urllib.parse import urlsplit

from e2b import (
    Sandbox,
    SandboxException,
    SandboxNotFoundException,
    SandboxState,
    Volume,
    VolumeException,
    VolumeNotFoundException,
)
from e2b.api.client.api.sandboxes import post_sandboxes_sandbox_id_refreshes
from e2b.api.client.models import SandboxRefreshRequest
from e2b.connection_config import ConnectionConfig
from e2b.sandbox_sync.paginator import get_api_client
from support import wait_for

WORLD = json.loads(os.environ["HUTCH_WORLD"]) if os.environ.get("HUTCH_WORLD") else None
NO_WORLD = "no test network world (run.sh needs root and hutch-test-world)"
API = urlsplit(os.environ["E2B_API_URL"])


def hutch(method, path, body=None, headers=None):
    """A call to hutchd itself (its /v1 API or an envd URL by Host): (status,
    body bytes)."""
    conn = http.client.HTTPConnection(API.hostname, API.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def v1_policy(sbx):
    """The egress policy hutch holds for the sandbox (GET /v1/.../network)."""
    key = "hk_" + os.environ["E2B_API_KEY"].removeprefix("e2b_")
    status, body = hutch(
        "GET",
        f"/v1/sandboxes/{sbx.sandbox_id}/network",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert status == 200, (status, body)
    return json.loads(body)


def by_url(sbx, url, method="GET", body=None, headers=None):
    """Fetches an envd URL the SDK made (https://49983-{id}.{domain}/... or
    E2B_SANDBOX_URL's host) the way a client holding only the URL would: no
    access token, the sandbox named by the Host as DNS would name it."""
    u = urlsplit(url)
    target = u.path + ("?" + u.query if u.query else "")
    host = f"49983-{sbx.sandbox_id}.hutch.test"
    return hutch(method, target, body=body, headers={"Host": host, **(headers or {})})


def fetch_inside(sbx, url):
    """What an HTTP GET from inside the sandbox gets: the page's first line,
    or "FAIL <why>"."""
    py = (
        "import urllib.request\n"
        "try:\n"
        f" print(urllib.request.urlopen('{url}',timeout=4).read().decode().strip())\n"
        "except Exception as e:\n"
        " print('FAIL',type(e).__name__)"
    )
    return sbx.commands.run(f'python3 -c "{py}"').stdout.strip()


class SnapshotTest(unittest.TestCase):
    def setUp(self):
        self.sbx = Sandbox.create(timeout=300)
        self.addCleanup(self.sbx.kill)

    def test_create_list_create_from_delete(self):
        self.sbx.files.write("/home/user/snap.txt", "kept in the snapshot")
        snap = self.sbx.create_snapshot()
        self.assertTrue(snap.snapshot_id.startswith("snap_"), snap.snapshot_id)
        self.assertEqual(snap.names, [])
        # Listed for its sandbox and in the whole list; not for another.
        mine = [s.snapshot_id for s in self.sbx.list_snapshots().next_items()]
        self.assertEqual(mine, [snap.snapshot_id])
        every = [s.snapshot_id for s in Sandbox.list_snapshots().next_items()]
        self.assertIn(snap.snapshot_id, every)
        other = Sandbox.list_snapshots(sandbox_id="sb_0000000000000000").next_items()
        self.assertEqual(other, [])
        named = Sandbox.list_snapshots(name=snap.snapshot_id).next_items()
        self.assertEqual([s.snapshot_id for s in named], [snap.snapshot_id])
        # A sandbox from it has the files (E2B: Sandbox.create(snapshot_id)).
        child = Sandbox.create(snap.snapshot_id, timeout=120)
        try:
            self.assertEqual(child.files.read("/home/user/snap.txt"), "kept in the snapshot")
            self.assertTrue(child.commands.run("whoami").stdout.strip() == "user")
        finally:
            child.kill()
        self.assertTrue(Sandbox.delete_snapshot(snap.snapshot_id))
        self.assertFalse(Sandbox.delete_snapshot(snap.snapshot_id))
        every = [s.snapshot_id for s in Sandbox.list_snapshots().next_items()]
        self.assertNotIn(snap.snapshot_id, every)
        with self.assertRaises(SandboxException) as cm:
            Sandbox.create(snap.snapshot_id, timeout=60)
        self.assertIn("not found", str(cm.exception))

    def test_list_pages_newest_first(self):
        first = self.sbx.create_snapshot(mode="filesystem")
        second = self.sbx.create_snapshot()
        self.addCleanup(Sandbox.delete_snapshot, first.snapshot_id)
        self.addCleanup(Sandbox.delete_snapshot, second.snapshot_id)
        pages = self.sbx.list_snapshots(limit=1)
        got = []
        while pages.has_next:
            got += [s.snapshot_id for s in pages.next_items()]
        self.assertEqual(got, [second.snapshot_id, first.snapshot_id])

    def test_names_move_to_the_newest_snapshot(self):
        name = "py-snap-" + uuid.uuid4().hex[:8]
        self.sbx.files.write("/home/user/v.txt", "one")
        first = self.sbx.create_snapshot(name=name)
        self.addCleanup(Sandbox.delete_snapshot, first.snapshot_id)
        self.assertEqual(first.names, [name])
        self.sbx.files.write("/home/user/v.txt", "two")
        second = self.sbx.create_snapshot(name=name)
        self.assertEqual(second.names, [name])
        # The name now names the second; the first keeps its id only.
        listed = {s.snapshot_id: s.names for s in self.sbx.list_snapshots().next_items()}
        self.assertEqual(listed, {first.snapshot_id: [], second.snapshot_id: [name]})
        by_name = Sandbox.list_snapshots(name=name).next_items()
        self.assertEqual([s.snapshot_id for s in by_name], [second.snapshot_id])
        child = Sandbox.create(name, timeout=60)
        try:
            self.assertEqual(child.files.read("/home/user/v.txt"), "two")
        finally:
            child.kill()
        # Deleted by name; the name then names nothing.
        self.assertTrue(Sandbox.delete_snapshot(name))
        with self.assertRaises(SandboxException) as cm:
            Sandbox.create(name, timeout=60)
        self.assertIn(name, str(cm.exception))
        remaining = [s.snapshot_id for s in self.sbx.list_snapshots().next_items()]
        self.assertEqual(remaining, [first.snapshot_id])

    def test_what_hutch_cannot_keep_is_not_supported(self):
        # A memory snapshot: a clear 501, nothing taken.
        with self.assertRaises(SandboxException) as cm:
            self.sbx.create_snapshot(mode="full")
        self.assertIn("not supported", str(cm.exception))
        self.assertEqual(self.sbx.list_snapshots().next_items(), [])
        # Templates are not deleted through E2B; snapshots only.
        with self.assertRaises(SandboxException) as cm:
            Sandbox.delete_snapshot("base")
        self.assertIn("not supported", str(cm.exception))

    def test_unknown_or_killed_sandbox_is_not_found(self):
        gone = Sandbox.create(timeout=60)
        gone.kill()
        for sid in (gone.sandbox_id, "sb_00000000deadbeef"):
            with self.assertRaises(SandboxNotFoundException):
                Sandbox.create_snapshot(sid)


class ForkTest(unittest.TestCase):
    def test_fork_copies_files_with_their_own_timeout(self):
        sbx = Sandbox.create(timeout=300)
        self.addCleanup(sbx.kill)
        sbx.files.write("/home/user/fork.txt", "from the parent")
        kids = sbx.fork(count=2, timeout=90)
        self.assertEqual(len(kids), 2)
        for kid in kids:
            self.assertIsInstance(kid, Sandbox, kid)
            self.addCleanup(kid.kill)
            self.assertNotEqual(kid.sandbox_id, sbx.sandbox_id)
            self.assertEqual(kid.files.read("/home/user/fork.txt"), "from the parent")
            info = kid.get_info()
            life = (info.end_at - info.started_at).total_seconds()
            self.assertAlmostEqual(life, 90, delta=15)
        # The children are independent of the parent and of each other.
        kids[0].files.write("/home/user/fork.txt", "changed in a child")
        self.assertEqual(kids[1].files.read("/home/user/fork.txt"), "from the parent")
        self.assertEqual(sbx.files.read("/home/user/fork.txt"), "from the parent")
        # One by default, by class method with the id.
        (one,) = Sandbox.fork(sbx.sandbox_id)
        self.addCleanup(one.kill)
        self.assertEqual(one.files.read("/home/user/fork.txt"), "from the parent")

    def test_unknown_or_killed_sandbox_is_not_found(self):
        gone = Sandbox.create(timeout=60)
        gone.kill()
        for sid in (gone.sandbox_id, "sb_00000000deadbeef"):
            with self.assertRaises(SandboxNotFoundException):
                Sandbox.fork(sid)


class NetworkTest(unittest.TestCase):
    def test_update_network_replaces_the_rules(self):
        target = WORLD["allowed"] if WORLD else "198.51.100.7"
        sbx = Sandbox.create(
            timeout=300,
            network={"deny_out": ["0.0.0.0/0"], "allow_out": [target]},
        )
        self.addCleanup(sbx.kill)
        p = v1_policy(sbx)
        # hutch holds an address as its /32 network.
        self.assertEqual(
            (p["mode"], p["default"], p["allow"]), ("policy", "deny", [target + "/32"])
        )
        if WORLD:
            self.assertEqual(fetch_inside(sbx, f"http://{WORLD['allowed']}:8080/"), "allowed-server")
            self.assertRegex(fetch_inside(sbx, f"http://{WORLD['denied']}:8080/"), "^FAIL")
        # The update replaces every rule: now only the other one is denied.
        other = WORLD["denied"] if WORLD else "198.51.100.8"
        sbx.update_network({"deny_out": [other]})
        p = v1_policy(sbx)
        self.assertEqual((p["default"], p["allow"], p["deny"]), ("allow", [], [other + "/32"]))
        if WORLD:
            self.assertEqual(fetch_inside(sbx, f"http://{WORLD['allowed']}:8080/"), "allowed-server")
            self.assertRegex(fetch_inside(sbx, f"http://{WORLD['denied']}:8080/"), "^FAIL")
        # Nothing given clears the rules; allow_internet_access false is
        # E2B's deny of all traffic.
        Sandbox.update_network(sbx.sandbox_id, {})
        p = v1_policy(sbx)
        self.assertEqual((p["default"], p["allow"], p["deny"]), ("allow", [], []))
        if WORLD:
            self.assertEqual(fetch_inside(sbx, f"http://{WORLD['denied']}:8080/"), "denied-server")
        sbx.update_network({"allow_internet_access": False})
        self.assertEqual(v1_policy(sbx)["default"], "deny")
        if WORLD:
            self.assertRegex(fetch_inside(sbx, f"http://{WORLD['allowed']}:8080/"), "^FAIL")

    @unittest.skipUnless(WORLD, NO_WORLD)
    def test_domain_rules_at_create_and_update(self):
        sbx = Sandbox.create(timeout=300, network={"deny_out": ["denied.test"]})
        self.addCleanup(sbx.kill)
        self.assertEqual(fetch_inside(sbx, "http://allowed.test:8080/"), "allowed-server")
        self.assertRegex(fetch_inside(sbx, "http://denied.test:8080/"), "^FAIL")
        sbx.update_network({"deny_out": ["0.0.0.0/0"], "allow_out": ["denied.test"]})
        self.assertEqual(fetch_inside(sbx, "http://denied.test:8080/"), "denied-server")
        self.assertRegex(fetch_inside(sbx, "http://allowed.test:8080/"), "^FAIL")

    def test_unmapped_settings_and_unknown_ids(self):
        sbx = Sandbox.create(timeout=120)
        self.addCleanup(sbx.kill)
        with self.assertRaises(SandboxException) as cm:
            sbx.update_network({"egress_proxy": {"address": "10.0.0.1:3128"}})
        self.assertIn("not supported", str(cm.exception))
        gone = Sandbox.create(timeout=60)
        gone.kill()
        for sid in (gone.sandbox_id, "sb_00000000deadbeef"):
            with self.assertRaises(SandboxNotFoundException):
                Sandbox.update_network(sid, {"deny_out": ["10.0.0.0/8"]})


class SignedUrlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sbx = Sandbox.create(timeout=300)

    @classmethod
    def tearDownClass(cls):
        cls.sbx.kill()

    def test_download_url_reads_without_a_token(self):
        self.sbx.files.write("/home/user/signed.txt", "signed content")
        for expiry in (None, 60):
            url = self.sbx.download_url("/home/user/signed.txt", use_signature_expiration=expiry)
            self.assertIn("signature=v1_", url)
            status, body = by_url(self.sbx, url)
            self.assertEqual((status, body), (200, b"signed content"))
        # The same URL as root, signed for that user.
        self.sbx.commands.run("echo root-only > /root/r.txt && chmod 600 /root/r.txt", user="root")
        url = self.sbx.download_url("/root/r.txt", user="root")
        self.assertEqual(by_url(self.sbx, url), (200, b"root-only\n"))

    def test_upload_url_writes_without_a_token(self):
        url = self.sbx.upload_url("/home/user/uploaded.txt", use_signature_expiration=60)
        boundary = uuid.uuid4().hex
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"uploaded.txt\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            "uploaded by URL\r\n"
            f"--{boundary}--\r\n"
        ).encode()
        status, _ = by_url(
            self.sbx,
            url,
            method="POST",
            body=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        self.assertEqual(status, 200)
        self.assertEqual(self.sbx.files.read("/home/user/uploaded.txt"), "uploaded by URL")

    def test_wrong_expired_or_missing_signatures_are_refused(self):
        self.sbx.files.write("/home/user/guarded.txt", "guarded")
        url = self.sbx.download_url("/home/user/guarded.txt", use_signature_expiration=60)
        # Another path, another operation, another user, a changed
        # signature, a moved expiry: each 401.
        read_other = url.replace("guarded.txt", "other.txt")
        self.assertEqual(by_url(self.sbx, read_other)[0], 401)
        as_write = self.sbx.upload_url("/home/user/guarded.txt", use_signature_expiration=60)
        self.assertEqual(by_url(self.sbx, as_write)[0], 401)  # a write signature, read
        self.assertEqual(by_url(self.sbx, url + "&username=root")[0], 401)
        self.assertEqual(by_url(self.sbx, url.replace("signature=v1_", "signature=v1_x"))[0], 401)
        exp = url.split("signature_expiration=")[1]
        moved = url.replace(f"signature_expiration={exp}", f"signature_expiration={int(exp) + 600}")
        self.assertEqual(by_url(self.sbx, moved)[0], 401)
        expired = self.sbx.download_url("/home/user/guarded.txt", use_signature_expiration=-5)
        status, body = by_url(self.sbx, expired)
        self.assertEqual(status, 401)
        self.assertIn("expired", body.decode())
        unsigned = url.split("&signature=")[0]
        self.assertEqual(by_url(self.sbx, unsigned)[0], 401)


class RefreshTest(unittest.TestCase):
    def test_refresh_extends_but_never_shortens(self):
        sbx = Sandbox.create(timeout=60)
        self.addCleanup(sbx.kill)
        client = get_api_client(ConnectionConfig())

        def refresh(sid, duration):
            return post_sandboxes_sandbox_id_refreshes.sync_detailed(
                sid, client=client, body=SandboxRefreshRequest(duration=duration)
            ).status_code

        self.assertEqual(refresh(sbx.sandbox_id, 900), 204)
        end = sbx.get_info().end_at
        left = (end - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        self.assertAlmostEqual(left, 900, delta=30)
        self.assertEqual(refresh(sbx.sandbox_id, 30), 204)
        self.assertEqual(sbx.get_info().end_at, end)
        self.assertEqual(refresh("sb_00000000deadbeef", 30), 404)


def seconds_left(sbx):
    end = sbx.get_info().end_at
    return (end - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


class LifecycleTest(unittest.TestCase):
    def test_on_timeout_pause_keeps_the_sandbox_until_connect(self):
        sbx = Sandbox.create(timeout=3, lifecycle={"on_timeout": "pause"})
        self.addCleanup(Sandbox.kill, sbx.sandbox_id)
        sbx.files.write("/home/user/kept.txt", "through the pause")
        sbx.commands.run("sleep 600", background=True)
        wait_for(lambda: sbx.get_info().state == SandboxState.PAUSED, "the pause at the timeout")
        self.assertFalse(sbx.is_running())
        # Kept well past its timeout (the server's largest TTL).
        self.assertGreater(seconds_left(sbx), 3600)
        back = Sandbox.connect(sbx.sandbox_id, timeout=120)
        self.assertEqual(back.files.read("/home/user/kept.txt"), "through the pause")
        # Memory kept too: the background command is still running.
        running = [" ".join([p.cmd, *p.args]) for p in back.commands.list()]
        self.assertTrue(any("sleep 600" in c for c in running), running)
        self.assertAlmostEqual(seconds_left(back), 120, delta=15)

    def test_kill_on_timeout_is_the_default(self):
        sbx = Sandbox.create(timeout=2, lifecycle={"on_timeout": "kill"})

        def gone():
            try:
                sbx.get_info()
                return False
            except SandboxNotFoundException:
                return True

        wait_for(gone, "the kill at the timeout")
        self.assertFalse(Sandbox.kill(sbx.sandbox_id))

    def test_connect_timeout_is_the_resumed_life(self):
        sbx = Sandbox.create(timeout=600)
        self.addCleanup(sbx.kill)
        sbx.pause()
        Sandbox.connect(sbx.sandbox_id, timeout=60)
        self.assertAlmostEqual(seconds_left(sbx), 60, delta=15)
        # On a running sandbox a connect only ever extends.
        Sandbox.connect(sbx.sandbox_id, timeout=30)
        self.assertAlmostEqual(seconds_left(sbx), 60, delta=15)

    def test_auto_resume_is_not_supported(self):
        with self.assertRaises(SandboxException) as cm:
            Sandbox.create(timeout=60, lifecycle={"on_timeout": "pause", "auto_resume": True})
        self.assertIn("not supported", str(cm.exception))


class VolumeTest(unittest.TestCase):
    def test_create_mount_share_destroy(self):
        name = "py-vol-" + uuid.uuid4().hex[:8]
        vol = Volume.create(name)
        self.addCleanup(Volume.destroy, vol.volume_id)
        # A hutch volume's id is its name.
        self.assertEqual((vol.volume_id, vol.name), (name, name))
        self.assertEqual(Volume.get_info(vol.volume_id).name, name)
        self.assertIn(name, [v.name for v in Volume.list()])
        # Mounted by Volume and by name; what one sandbox writes the next reads.
        first = Sandbox.create(timeout=120, volume_mounts={"/mnt/data": vol})
        first.commands.run("echo shared > /mnt/data/x.txt", user="root")
        with self.assertRaises(VolumeException) as cm:
            Volume.destroy(vol.volume_id)  # still mounted
        self.assertIn("mounted", str(cm.exception))
        first.kill()
        second = Sandbox.create(timeout=120, volume_mounts={"/srv/vol": name})
        try:
            self.assertEqual(second.files.read("/srv/vol/x.txt"), "shared\n")
        finally:
            second.kill()
        self.assertTrue(Volume.destroy(vol.volume_id))
        self.assertFalse(Volume.destroy(vol.volume_id))
        with self.assertRaises(VolumeNotFoundException):
            Volume.get_info(vol.volume_id)
        self.assertNotIn(name, [v.name for v in Volume.list()])

    def test_unknown_volume_at_create_is_an_error(self):
        with self.assertRaises(SandboxException) as cm:
            Sandbox.create(timeout=60, volume_mounts={"/mnt/x": "no-such-volume-py"})
        self.assertIn("no-such-volume-py", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
