#!/usr/bin/env python3
"""Create from a pulled OCI image vs create from `base`: create -> first exec.

Issue 31 asks that a sandbox made from a pulled image answer its first
exec within 1.2x the time of one made from hutch's own `base` template.
This starts Debian's docker-registry on loopback, builds and pushes the
test image of api_image_test (tests/support/oci_test_image.sh: three
layers, a whiteout, USER/WORKDIR/ENV), starts one hutchd, pulls the image
once (timed on its own: a pull is not a create), then takes turns — a
create -> exec `true` -> delete cycle from the image, one from `base`,
the order swapped every round — so both see the same machine.

  python3 bench/image_create.py --build build/rel \
      --templates build/asan/test-templates --n 200

Run as root, like hutchd; needs skopeo, umoci and docker-registry
(scripts/setup installs them).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from paired_builds import Server, create, ms, percentiles, request, turns

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Registry:
    """docker-registry on a free loopback port, storage in a temp dir."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hutch-bench-registry-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        conf = os.path.join(self.dir, "config.yml")
        with open(conf, "w") as f:
            f.write(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                f"    rootdirectory: {self.dir}/data\n"
                f"http:\n  addr: {self.addr}\n  secret: hutch-bench\n"
            )
        with open(os.path.join(self.dir, "registry.log"), "w") as log:
            self.proc = subprocess.Popen(
                ["/usr/bin/docker-registry", "serve", conf], stdout=log, stderr=log
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{self.addr}/v2/", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit("docker-registry did not start")

    def push_test_image(self, repo_tag):
        script = os.path.join(SOURCE, "tests", "support", "oci_test_image.sh")
        subprocess.run(["bash", script, self.dir, self.addr, repo_tag, "bench"], check=True)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def first_exec(conn, body):
    """create -> first exec `true` -> delete; the first two timed."""
    t0 = time.perf_counter()
    sid = create(conn, body)
    t1 = time.perf_counter()
    status, data = request(conn, "POST", f"/v1/sandboxes/{sid}/exec", {"cmd": "true"})
    t2 = time.perf_counter()
    if status != 200:
        raise SystemExit(f"exec: {status} {data[:300]!r}")
    request(conn, "DELETE", f"/v1/sandboxes/{sid}")
    return {"create": ms(t0, t1), "create->first exec": ms(t0, t2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="build dir with hutchd and hutch-agent")
    ap.add_argument("--templates", required=True, help="--templates-dir (holds base)")
    ap.add_argument("--n", type=int, default=200, help="cycles of each kind")
    ap.add_argument("--settle", type=float, default=10, help="seconds to wait after the start")
    args = ap.parse_args()

    registry = Registry()
    try:
        registry.push_test_image("bench/image:1")
        ref = f"{registry.addr}/bench/image:1"
        server = Server(args.build, args.templates, ["--image-insecure-registry", registry.addr])
        try:
            conn = server.conn()
            t0 = time.perf_counter()
            sid = create(conn, {"image": ref})
            print(f"first create from the image (pull + unpack + create): {ms(t0, time.perf_counter()):.0f} ms")
            request(conn, "DELETE", f"/v1/sandboxes/{sid}")
            time.sleep(args.settle)  # the pools a start fills are full
            bodies = {"base": {}, "image": {"image": ref}}
            rows = {name: [] for name in bodies}
            for i in range(args.n):
                for name in turns(i, list(bodies)):
                    rows[name].append(first_exec(conn, bodies[name]))
            p50s = {}
            for name, r in rows.items():
                for what in r[0]:
                    p50, p90, p99 = percentiles([x[what] for x in r])
                    p50s[(name, what)] = p50
                    print(f"{name:5} {what}: p50 {p50:.2f}  p90 {p90:.2f}  p99 {p99:.2f} ms  (n={len(r)})")
            ratio = p50s[("image", "create->first exec")] / p50s[("base", "create->first exec")]
            print(f"image / base, create->first exec p50: {ratio:.2f}x (issue 31 asks <= 1.2x)")
        finally:
            server.stop()
    finally:
        registry.stop()


if __name__ == "__main__":
    main()
