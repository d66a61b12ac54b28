"""Starts hutch's code server (src/interpreter) on a free port and talks to it over HTTP.

The tests drive the server as the E2B SDKs do: JSON requests, and
/execute's newline-delimited JSON read line by line as it streams.
HUTCH_SOURCE_DIR (set by ctest) names the checkout; by default the one
this file is in.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = os.environ.get("HUTCH_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER = os.path.join(SOURCE_DIR, "src", "interpreter", "hutch_code_server.py")


class CodeServer:
    def __init__(self, *extra_args):
        self.dir = tempfile.mkdtemp(prefix="hutch-code-server-test-")
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--host", "127.0.0.1", "--port", "0", "--cwd", self.dir,
             *extra_args], stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
            # What a sandbox's env would carry: the kernels must see it.
            env=dict(os.environ, HUTCH_SERVER_ENV_PROBE="from-the-server"))
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the code server did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        deadline = time.monotonic() + 120
        while self.request("GET", "/health")[0] != 200:
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the code server's default context did not start")
            time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None):
        """(status, body text) of one request."""
        conn = self.connect()
        try:
            data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        except ConnectionRefusedError:
            return 0, ""
        finally:
            conn.close()

    def json(self, method, path, body=None):
        status, text = self.request(method, path, body)
        if status != 200:
            raise AssertionError(f"{method} {path}: {status} {text}")
        return json.loads(text)

    def start_execute(self, body):
        """An /execute under way: (connection, response) to read lines from."""
        conn = self.connect()
        conn.request("POST", "/execute", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        return conn, conn.getresponse()

    def execute_raw(self, body):
        """(status, raw lines) of one /execute, read to its end."""
        conn, resp = self.start_execute(body)
        try:
            if resp.status != 200:
                return resp.status, [resp.read().decode()]
            lines = []
            while True:
                line = resp.readline()
                if not line:
                    return resp.status, lines
                lines.append(line.decode())
        finally:
            conn.close()

    def execute(self, code, **fields):
        """The parsed lines of a successful /execute, checked for E2B's framing."""
        status, raw = self.execute_raw(dict(code=code, **fields))
        if status != 200:
            raise AssertionError(f"/execute: {status} {raw}")
        return check_lines(raw)


def read_past(resp, needle: bytes):
    """Reads a streaming /execute until a line holding needle (fails at the end)."""
    while True:
        line = resp.readline()
        if not line:
            raise AssertionError(f"the stream ended before {needle!r}")
        if needle in line:
            return line


def check_lines(raw):
    """Parses lines, asserting what every E2B client relies on: no blank
    line, one JSON object per line, no null field, end_of_execution last."""
    lines = []
    for text in raw:
        assert text.endswith("\n"), f"an unterminated line: {text!r}"
        assert text.strip(), "a blank line in the stream"
        line = json.loads(text)
        assert isinstance(line, dict) and "type" in line, text
        assert all(v is not None for v in line.values()), f"a null field: {text}"
        lines.append(line)
    assert lines and lines[-1] == {"type": "end_of_execution"}, f"no end_of_execution last: {raw}"
    assert sum(1 for l in lines if l["type"] == "end_of_execution") == 1
    return lines


def of_type(lines, kind):
    return [l for l in lines if l["type"] == kind]


def stdout(lines):
    return "".join(l["text"] for l in of_type(lines, "stdout"))


def stderr(lines):
    return "".join(l["text"] for l in of_type(lines, "stderr"))


def main_text(lines):
    mains = [l for l in of_type(lines, "result") if l["is_main_result"]]
    return mains[0].get("text") if mains else None


def error(lines):
    errors = of_type(lines, "error")
    return errors[0] if errors else None
