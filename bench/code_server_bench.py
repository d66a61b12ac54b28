#!/usr/bin/env python3
"""Round trip of runCode("1+1") on a warm context of hutch's code server, on the host.

Starts src/interpreter/hutch_code_server.py on a free port (a temp dir as
its cwd), warms each language's default context, then times N /execute
calls per language on one keep-alive connection, from sending the
request to reading end_of_execution (what the E2B SDK waits for), and,
next to it, `python3 -c "1+1"` spawned and waited (what an exec of the
same code pays for the interpreter alone) and the same code sent straight
to an ipykernel with jupyter_client (the kernel's own floor). No sandbox and no hutchd: the
server's own cost. Use Debian's python3 (it has the kernel packages):

    /usr/bin/python3 bench/code_server_bench.py [--n 200]
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "src", "interpreter", "hutch_code_server.py")
CASES = [("python", "1+1"), ("javascript", "1+1"), ("bash", "echo $((1+1))")]


def percentile(sorted_ms, p):
    """Interpolated between ranks, as hutch_bench does."""
    k = (len(sorted_ms) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (k - lo)


def run_code(conn, language, code):
    body = json.dumps({"code": code, "language": language})
    conn.request("POST", "/execute", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    if resp.status != 200 or not text.endswith('{"type":"end_of_execution"}\n') or "2" not in text:
        raise RuntimeError(f"unexpected answer: {resp.status} {text}")


def timed(fn, n):
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return percentile(samples, 0.5), percentile(samples, 0.99)


def kernel_floor(n):
    """The same code sent straight to an ipykernel by jupyter_client, execute → idle:
    what any Jupyter-based server pays before its own work."""
    import asyncio

    from jupyter_client import AsyncKernelManager

    async def measure():
        km = AsyncKernelManager(kernel_name="python3")
        await km.start_kernel(env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"))
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        samples = []
        try:
            for i in range(20 + n):
                t = time.perf_counter()
                msg_id = kc.execute("1+1")
                while True:
                    m = await kc.get_iopub_msg()
                    if (
                        m["parent_header"].get("msg_id") == msg_id
                        and m["msg_type"] == "status"
                        and m["content"]["execution_state"] == "idle"
                    ):
                        break
                if i >= 20:
                    samples.append((time.perf_counter() - t) * 1000)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        samples.sort()
        return percentile(samples, 0.5), percentile(samples, 0.99)

    return asyncio.run(measure())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    n = ap.parse_args().n
    cwd = tempfile.mkdtemp(prefix="hutch-code-bench-")
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--host", "127.0.0.1", "--port", "0", "--cwd", cwd], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            conn.request("GET", "/health")
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                break
            time.sleep(0.1)
        print(f"code server round trips on the host, N={n} each (ms)")
        print(f"{'case':<40} {'p50':>8} {'p99':>8}")
        for language, code in CASES:
            for _ in range(20):  # warm-up: the default context starts, caches fill
                run_code(conn, language, code)
            p50, p99 = timed(lambda language=language, code=code: run_code(conn, language, code), n)
            print(f"{'runCode ' + language + ' ' + repr(code):<40} {p50:8.2f} {p99:8.2f}")
        p50, p99 = timed(lambda: subprocess.run([sys.executable, "-c", "1+1"], check=True), n)
        print(f"{'baseline: spawn python3 -c 1+1':<40} {p50:8.2f} {p99:8.2f}")
        p50, p99 = kernel_floor(n)
        print(f"{'baseline: jupyter_client → ipykernel':<40} {p50:8.2f} {p99:8.2f}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
