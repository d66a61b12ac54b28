#!/usr/bin/env python3
"""Two hutchd builds measured side by side, for a machine that is not quiet.

Alternating whole runs (bench/hutch_load against one build, then the other)
compares two moments of the machine as much as two builds: on a 2-core
machine with compilers running, run-to-run noise exceeds the differences we
look for. Here both servers run at once and the client takes turns — one
operation or cycle on A, then one on B, the order swapped every round — so
each build sees the same load. What one server's background work costs
the other is shared, so compare within one run only.

Modes:
  cycle       create -> exec `true` -> delete, one cycle per build in turn
              (create, exec, delete and whole-cycle times)
  createonly  creates in turn (memory_mb 64), all deleted at the end
              (creates without another sandbox's teardown beside them)
  burst       fresh servers each round: N concurrent creates on one, then
              on the other (a first burst after a start)

  python3 bench/paired_builds.py --a OLD_BUILD_DIR --b NEW_BUILD_DIR \
      --templates build/asan/test-templates --mode cycle --n 400

A build dir holds `hutchd` and `hutch-agent` (a RelWithDebInfo build:
bench/README.md). Run as root, like hutchd.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

KEY = "bench-key-0123456789"


class Server:
    def __init__(self, build, templates, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="hutch-paired-")
        env = dict(os.environ, HUTCH_API_KEY=KEY)
        with open(os.path.join(self.dir, "hutchd.log"), "w") as log:
            # The benchmark measures the server, not its per-key limit.
            self.proc = subprocess.Popen(
                [
                    os.path.join(build, "hutchd"),
                    "--listen",
                    "127.0.0.1:0",
                    "--state-dir",
                    os.path.join(self.dir, "state"),
                    "--templates-dir",
                    templates,
                    "--log-level",
                    "warn",
                    "--rate-limit",
                    "0",
                    "--agent",
                    os.path.join(build, "hutch-agent"),
                    *extra_args,
                ],
                stdout=log,
                stderr=log,
                env=env,
            )
        addr_file = os.path.join(self.dir, "state", "hutchd.addr")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"hutchd of {build} exited; log in {self.dir}/hutchd.log")
            try:
                with open(addr_file) as f:
                    self.port = int(f.read().strip().rsplit(":", 1)[1])
                break
            except (FileNotFoundError, ValueError, IndexError):
                time.sleep(0.01)
        else:
            raise SystemExit(f"hutchd of {build} did not start in 180 s")

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def request(conn, method, path, body=None):
    headers = {"Authorization": "Bearer " + KEY, "Content-Type": "application/json"}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read()


def create(conn, body):
    status, data = request(conn, "POST", "/v1/sandboxes", body)
    if status != 201:
        raise SystemExit(f"create: {status} {data[:300]!r}")
    return json.loads(data)["id"]


def ms(t0, t1):
    return (t1 - t0) * 1e3


def cycle(conn):
    t0 = time.perf_counter()
    sid = create(conn, {})
    t1 = time.perf_counter()
    status, data = request(conn, "POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    if status != 200:
        raise SystemExit(f"exec: {status} {data[:300]!r}")
    t2 = time.perf_counter()
    request(conn, "DELETE", f"/v1/sandboxes/{sid}")
    t3 = time.perf_counter()
    return {"create": ms(t0, t1), "exec": ms(t1, t2), "delete": ms(t2, t3), "cycle": ms(t0, t3)}


def percentiles(values):
    v = sorted(values)
    return v[len(v) // 2], v[int(len(v) * 0.9)], v[min(len(v) - 1, int(len(v) * 0.99))]


def turns(i, names):
    return names if i % 2 == 0 else list(reversed(names))


def run_cycles(args, builds, createonly):
    servers = {name: Server(b, args.templates) for name, b in builds.items()}
    try:
        conns = {name: s.conn() for name, s in servers.items()}
        time.sleep(args.settle)  # what each fills after a start (pools) is full
        rows = {name: [] for name in builds}
        made = {name: [] for name in builds}
        for i in range(args.n):
            for name in turns(i, list(builds)):
                if createonly:
                    t0 = time.perf_counter()
                    made[name].append(create(conns[name], {"memory_mb": 64}))
                    rows[name].append({"create": ms(t0, time.perf_counter())})
                else:
                    rows[name].append(cycle(conns[name]))
        for name, ids in made.items():
            for sid in ids:
                request(conns[name], "DELETE", f"/v1/sandboxes/{sid}")
        for name, r in rows.items():
            for what in r[0]:
                p50, p90, p99 = percentiles([x[what] for x in r])
                print(f"{name} {what}: p50 {p50:.2f}  p90 {p90:.2f}  p99 {p99:.2f} ms  (n={len(r)})")
    finally:
        for s in servers.values():
            s.stop()


def run_bursts(args, builds):
    for rnd in range(args.rounds):
        servers = {name: Server(b, args.templates) for name, b in builds.items()}
        try:
            time.sleep(args.settle)
            for name in turns(rnd, list(builds)):
                times, codes = [0.0] * args.n, [0] * args.n

                def one(i, port=servers[name].port, times=times, codes=codes):
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    t0 = time.perf_counter()
                    codes[i], _ = request(conn, "POST", "/v1/sandboxes", {})
                    times[i] = ms(t0, time.perf_counter())

                threads = [threading.Thread(target=one, args=(i,)) for i in range(args.n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                p50, _, p99 = percentiles(times)
                print(
                    f"round {rnd} {name}: burst of {args.n}: p50 {p50:.0f}  p99 {p99:.0f} ms, "
                    f"{codes.count(201)} created",
                    flush=True,
                )
                time.sleep(3)
        finally:
            for s in servers.values():
                s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="build dir of the first hutchd (e.g. the old one)")
    ap.add_argument("--b", required=True, help="build dir of the second hutchd")
    ap.add_argument("--templates", required=True, help="--templates-dir for both")
    ap.add_argument("--mode", choices=["cycle", "createonly", "burst"], default="cycle")
    ap.add_argument("--n", type=int, default=300, help="cycles/creates per build, or burst size")
    ap.add_argument("--rounds", type=int, default=6, help="burst mode: rounds (fresh servers)")
    ap.add_argument("--settle", type=float, default=10, help="seconds to wait after the starts")
    args = ap.parse_args()
    builds = {"a": args.a, "b": args.b}
    if args.mode == "burst":
        run_bursts(args, builds)
    else:
        run_cycles(args, builds, args.mode == "createonly")


if __name__ == "__main__":
    main()
