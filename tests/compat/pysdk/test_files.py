"""Files of sandboxes and volumes, and a 200 MB round trip in bounded memory."""

from __future__ import annotations

import hashlib
import resource
from typing import Iterator

import pytest

import hutch

BIG = 200 << 20
CHUNK = 1 << 20


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


def _pattern() -> Iterator[bytes]:
    """200 MB of bytes that are not all alike, made as they are sent."""
    block = hashlib.sha256(b"hutch").digest() * (CHUNK // 32)
    for i in range(BIG // CHUNK):
        yield i.to_bytes(4, "big") + block[4:]


def test_200mb_round_trip_in_bounded_memory(client: hutch.Client) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    want = hashlib.sha256()
    for chunk in _pattern():
        want.update(chunk)
    with client.create(ttl_seconds=600, disk_mb=1024) as sb:
        w = sb.files.write("/root/big.bin", _pattern())  # streamed up, chunked
        assert w.size == BIG
        assert sb.exec("sha256sum /root/big.bin").stdout.split()[0] == want.hexdigest()
        got = hashlib.sha256()
        n = 0
        with sb.files.open("/root/big.bin") as r:  # streamed down
            assert r.length == BIG
            for chunk in r.iter_chunks():
                got.update(chunk)
                n += len(chunk)
        assert n == BIG and got.hexdigest() == want.hexdigest()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(f"\npeak RSS of the test process: {before / (1 << 20):.1f} MiB before the 200 MB round trip, "
          f"{peak / (1 << 20):.1f} MiB after")
    # Far below the file: neither direction held it (or a big part of it) in memory.
    assert peak < BIG // 4


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
