"""Fixtures of the hutch Python SDK suite: real hutchd servers on port 0 with
temp state dirs (HUTCHD_BIN, HUTCH_TEMPLATES_DIR from CTest's environment),
the SDK imported from sdk/python."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

import hutch  # noqa: E402


@dataclass
class Server:
    url: str
    key: str
    state: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def client(self, **kw: object) -> hutch.Client:
        return hutch.Client(self.url, self.key, **kw)  # type: ignore[arg-type]

    def log_tail(self, n: int = 80) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _net_pool() -> str:
    # A /24 of its own per run, away from hutchd's default pool and the C++
    # suites' (198.18.N.0/24), so this suite's servers never share addresses.
    return f"10.232.{os.getpid() % 250}.0/24"


def start_server(tmp: Path, name: str, extra: Optional[List[str]] = None, state: Optional[Path] = None,
                 key: Optional[str] = None) -> Server:
    bin_ = os.environ.get("HUTCHD_BIN")
    tpl = os.environ.get("HUTCH_TEMPLATES_DIR")
    if not bin_ or not tpl:
        pytest.skip("HUTCHD_BIN and HUTCH_TEMPLATES_DIR are not set (run through ctest)")
    state = state or tmp / name / "state"
    state.mkdir(parents=True, exist_ok=True)
    log = tmp / f"{name}.log"
    key = key or "hk_" + secrets.token_hex(16)
    env = dict(os.environ, HUTCH_API_KEY=key)
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "quarantine_size_mb=16"
    args = [bin_, "--listen", "127.0.0.1:0", "--state-dir", str(state), "--templates-dir", tpl,
            "--net-pool", _net_pool(), "--net-warm", "0", "--warm-pool", "none"]
    if "--rate-limit" not in (extra or []):
        args += ["--rate-limit", "0"]
    args += extra or []
    addr = state / "hutchd.addr"
    addr.unlink(missing_ok=True)
    with open(log, "ab") as lf:
        proc = subprocess.Popen(args, stdout=lf, stderr=subprocess.STDOUT, env=env)
    for _ in range(1800):  # the first start builds the base template
        if addr.exists() and addr.read_text().strip():
            break
        if proc.poll() is not None:
            raise RuntimeError(f"hutchd exited {proc.returncode}:\n" + log.read_text(errors="replace")[-4000:])
        time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("hutchd did not start")
    return Server("http://" + addr.read_text().strip(), key, state, log, proc)


def stop_server(s: Server) -> None:
    """SIGTERM; hutchd must exit 0 (sanitizer builds report leaks that way)."""
    s.proc.send_signal(signal.SIGTERM)
    try:
        rc = s.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        s.proc.kill()
        rc = s.proc.wait()
    assert rc == 0, f"hutchd exited {rc}:\n{s.log_tail()}"


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="hutch-pysdk-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server(tmp_root: Path) -> Iterator[Server]:
    """The suite's main hutchd (code-interpreter runs use HUTCH_CI_STATE_DIR)."""
    state = os.environ.get("HUTCH_CI_STATE_DIR")
    s = start_server(tmp_root, "main", state=Path(state) if state else None)
    yield s
    stop_server(s)


@pytest.fixture()
def client(server: Server) -> Iterator[hutch.Client]:
    c = server.client()
    yield c
    c.close()


@pytest.fixture()
def sandbox(client: hutch.Client) -> Iterator[hutch.Sandbox]:
    with client.create(ttl_seconds=600) as sb:
        yield sb


@pytest.fixture(scope="session")
def health(server: Server) -> dict:  # type: ignore[type-arg]
    return server.client().health()
