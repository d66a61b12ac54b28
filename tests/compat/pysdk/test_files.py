"""Files of sandboxes and volumes, and a 200 MB round trip in bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hutch
from conftest import ROOT, Server

BIG = 200 << 20


def test_file_calls(sandbox: hutch.Sandbox) -> None:
    f = sandbox.files
    w = f.write("/home/data/a.bin", b"\x00\x01\xffabc")
    assert (w.path, w.size) == ("/home/data/a.bin", 6)
    assert f.read("/home/data/a.bin") == b"\x00\x01\xffabc"
    assert f.read("/home/data/a.bin", offset=3) == b"abc"
    assert f.read("/home/data/a.bin", offset=1, length=2) == b"\x01\xff"
    f.write_text("/home/data/t.txt", "héllo")
    assert f.read_text("/home/data/t.txt") == "héllo"
    f.write("/home/data/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    assert f.stat("/home/data/run.sh").mode & 0o777 == 0o755
    assert sandbox.exec("/home/data/run.sh").stdout == "ran\n"
    f.write("/home/data/parts.txt", iter([b"a" * 10, b"b" * 5]))  # chunked, unknown size
    assert f.stat("/home/data/parts.txt").size == 15

    d = f.mkdir("/home/data/sub/deeper")
    assert d.is_dir and d.path == "/home/data/sub/deeper"
    moved = f.move("/home/data/t.txt", "/home/data/sub/t2.txt")
    assert moved.path == "/home/data/sub/t2.txt" and not f.exists("/home/data/t.txt")
    names = sorted(e.path for e in f.list("/home/data", depth=2))
    assert "/home/data/sub/t2.txt" in names and "/home/data/sub/deeper" in names
    assert {e.name for e in f.list("/home/data")} == {"a.bin", "run.sh", "parts.txt", "sub"}

    with pytest.raises(hutch.ConflictError):
        f.remove("/home/data/sub")  # not empty, not recursive
    f.remove("/home/data/sub", recursive=True)
    assert not f.exists("/home/data/sub")
    with pytest.raises(hutch.FileNotFoundInSandboxError) as e:
        f.read("/home/data/nope")
    assert e.value.status == 404 and isinstance(e.value, hutch.NotFoundError)
    with pytest.raises(hutch.RangeNotSatisfiableError):
        f.read("/home/data/a.bin", offset=100)
    with pytest.raises(hutch.NotADirectoryInSandboxError):
        f.list("/home/data/a.bin")


ROUND_TRIP = """
import hashlib, json, resource, sys
sys.path.insert(0, sys.argv[1])
import hutch

BIG, CHUNK = 200 << 20, 1 << 20

def pattern():
    # 200 MB of bytes that are not all alike, made as they are sent.
    block = hashlib.sha256(b"hutch").digest() * (CHUNK // 32)
    for i in range(BIG // CHUNK):
        yield i.to_bytes(4, "big") + block[4:]

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
hwm_before = hwm()
want = hashlib.sha256()
for chunk in pattern():
    want.update(chunk)
with hutch.Client(sys.argv[2], sys.argv[3]).create(ttl_seconds=600, disk_mb=1024) as sb:
    size = sb.files.write("/root/big.bin", pattern()).size        # streamed up, chunked
    inside = sb.exec("sha256sum /root/big.bin").stdout.split()[0]
    got, n = hashlib.sha256(), 0
    with sb.files.open("/root/big.bin") as r:                      # streamed down
        length = r.length
        for chunk in r.iter_chunks():
            got.update(chunk)
            n += len(chunk)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
# getrusage's figure starts from the parent's at fork (Linux keeps it across
# exec); VmHWM is this process image's own high-water mark.
print(json.dumps({"size": size, "length": length, "read": n, "want": want.hexdigest(), "inside": inside,
                  "got": got.hexdigest(), "before": before, "peak": peak, "hwm": hwm(),
                  "hwm_before": hwm_before}))
"""


def test_200mb_round_trip_in_bounded_memory(server: Server) -> None:
    # A fresh interpreter, so its peak RSS is this transfer's alone.
    r = subprocess.run([sys.executable, "-c", ROUND_TRIP, str(ROOT / "sdk" / "python"), server.url, server.key],
                       capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    assert d["size"] == d["length"] == d["read"] == BIG
    assert d["want"] == d["inside"] == d["got"]
    mib = 1 << 20
    print(f"\npeak RSS of the process that sent and fetched 200 MB: VmHWM {d['hwm'] / mib:.1f} MiB "
          f"({d['hwm_before'] / mib:.1f} MiB before the transfer); "
          f"getrusage ru_maxrss {d['peak'] / mib:.1f} MiB ({d['before'] / mib:.1f} MiB inherited at its start)")
    # Far below the file: neither direction held it (or a big part of it) in memory.
    assert 0 < d["hwm"] < BIG // 4
    assert d["hwm"] - d["hwm_before"] < BIG // 10
    assert d["peak"] < BIG // 2


def test_volume_files_and_mounts(client: hutch.Client) -> None:
    vol = client.volumes.create("pysdk-vol", size_mb=64)
    try:
        assert vol.info.size_mb == 64
        vol.files.write("seed.txt", "from the host side")
        assert "seed.txt" in [e.name for e in vol.files.list("/")]
        with client.create(ttl_seconds=120, volumes=[vol.mount("/mnt/v")]) as sb:
            assert sb.exec("cat /mnt/v/seed.txt").stdout == "from the host side"
            sb.exec("echo written > /mnt/v/out.txt", check=True)
            assert client.volumes.get("pysdk-vol").info.in_use_by == [sb.id]
            with pytest.raises(hutch.ConflictError):
                vol.delete()
        assert vol.files.read_text("out.txt") == "written\n"
        assert "pysdk-vol" in [v.name for v in client.volumes.list()]
        with pytest.raises(hutch.VolumeNotFoundError):
            client.volumes.get("pysdk-none")
    finally:
        vol.delete()
    assert "pysdk-vol" not in [v.name for v in client.volumes.list()]
