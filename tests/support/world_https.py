#!/usr/bin/env python3
"""An HTTPS server of the network tests' "outside world" (credential vault).

Run inside the world's network namespace:
  world_https.py CERT KEY SECRET
Listens on 0.0.0.0:443 and answers:
  /secret    200 "granted" when the request carries x-api-key: SECRET,
             else 401 "denied"
  /echo      200 with the JSON of what the request carried: its x-api-key
             authorization and x-client-id headers, its query string and Host
  /redirect  302 to https://other.vault.test/echo
Exits when its parent test kills it.
"""

import http.server
import json
import ssl
import sys
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body, extra=None):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/secret":
            ok = self.headers.get("x-api-key") == SECRET
            self.reply(200 if ok else 401, "granted\n" if ok else "denied\n")
        elif url.path == "/echo":
            seen = {
                "x-api-key": self.headers.get("x-api-key"),
                "authorization": self.headers.get("authorization"),
                "x-client-id": self.headers.get("x-client-id"),
                "query": url.query,
                "host": self.headers.get("host"),
            }
            self.reply(200, json.dumps(seen) + "\n")
        elif url.path == "/redirect":
            self.reply(302, "moved\n", {"Location": "https://other.vault.test/echo"})
        else:
            self.reply(404, "no such page\n")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    CERT, KEY, SECRET = sys.argv[1], sys.argv[2], sys.argv[3]
    server = http.server.ThreadingHTTPServer(("0.0.0.0", 443), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
