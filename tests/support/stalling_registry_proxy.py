#!/usr/bin/env python3
"""A loopback HTTP proxy in front of a registry for api_image_test.

It relays GET and HEAD requests to the registry, except that the first
large blob (a layer) it serves stops half-way: the proxy sends half the
bytes, writes "stalled" to STATUS_FILE and holds the connection. The test
then kills the proxy (by its pid) and the registry, so the pull loses its
registry in the middle of a layer.

usage: stalling_registry_proxy.py UPSTREAM_PORT PORT_FILE STATUS_FILE
"""
import http.client
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = int(sys.argv[1])
PORT_FILE = sys.argv[2]
STATUS_FILE = sys.argv[3]
LARGE = 64 * 1024
STALLED = threading.Event()


class Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.relay("GET")

    def do_HEAD(self):
        self.relay("HEAD")

    def relay(self, method):
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=30)
        # Every header as sent: skopeo sends several Accept lines.
        up.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():
            if k.lower() != "connection":
                up.putheader(k, v)
        up.endheaders()
        resp = up.getresponse()
        body = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        length = resp.getheader("Content-Length", "0") if method == "HEAD" else str(len(body))
        self.send_header("Content-Length", length)
        self.end_headers()
        if method == "HEAD":
            return
        if "/blobs/" in self.path and len(body) > LARGE and not STALLED.is_set():
            STALLED.set()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            with open(STATUS_FILE, "w", encoding="utf-8") as f:
                f.write("stalled")
            time.sleep(3600)
            return
        self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    with open(PORT_FILE, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
