// Exposed ports against the real hutchd: servers started inside a sandbox
// (python's http.server, a stdlib HTTP echo server, a stdlib WebSocket
// echo server) answer through /v1/sandboxes/{id}/ports/{port}/..., with
// bodies streamed both ways, WebSocket upgrades, the errors (nothing
// listening, bad port, no key, paused, deleted), and the E2B forms (Host
// "{port}-{id}.{domain}" and E2b-Sandbox-Port) with their tokens.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "tests/support/test_server.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using hutch::testing::TestServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

// An HTTP/1.1 server (stdlib only): GET/HEAD/DELETE answer what arrived
// (method, path, headers) as JSON; GET /bytes/N sends N bytes in 64 KiB
// writes; GET /chunked streams three lines as chunks; POST/PUT echo the
// body (Content-Length or chunked) with its SHA-256 in X-Body-Sha256.
constexpr const char* kEchoServer = R"PY(
import hashlib, json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, code, body, ctype, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_GET(self):
        if self.path == "/chunked":
            # A streamed chunked body, each chunk in its own write after a
            # pause (as a streaming server flushes its lines).
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for part in (b"one\n", b"two\n", b"three\n"):
                time.sleep(0.2)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/bytes/"):
            n = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"z" * 65536
            while n > 0:
                k = min(n, len(block))
                self.wfile.write(block[:k])
                n -= k
            return
        info = {"method": self.command, "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()}}
        self.reply(200, json.dumps(info).encode(), "application/json")
    do_HEAD = do_GET
    do_DELETE = do_GET
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))
    def do_POST(self):
        data = self.body()
        self.reply(200, data, "application/octet-stream", [("X-Body-Sha256", hashlib.sha256(data).hexdigest())])
    do_PUT = do_POST

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)PY";

// A WebSocket echo server (stdlib only, RFC 6455 handshake and frames;
// unfragmented messages): every frame comes back with its opcode.
constexpr const char* kWsServer = R"PY(
import base64, hashlib, socket, struct, sys, threading
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

def serve(c):
    data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d:
            return
        data += d
    head, buf = data.split(b"\r\n\r\n", 1)
    key = ""
    for line in head.decode().split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "sec-websocket-key":
            key = v.strip()
    if not key:
        c.sendall(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        c.close()
        return
    acc = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Accept: " + acc + "\r\n\r\n").encode())
    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                raise EOFError
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    while True:
        b0, b1 = need(2)
        op, n = b0 & 15, b1 & 127
        if n == 126:
            n = struct.unpack(">H", need(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", need(8))[0]
        mask = need(4) if b1 & 128 else b"\0\0\0\0"
        p = bytes(x ^ mask[i % 4] for i, x in enumerate(need(n)))
        if n < 126:
            hdr = bytes([0x80 | op, n])
        elif n < 65536:
            hdr = bytes([0x80 | op, 126]) + struct.pack(">H", n)
        else:
            hdr = bytes([0x80 | op, 127]) + struct.pack(">Q", n)
        c.sendall(hdr + p)
        if op == 8:
            c.close()
            return

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=lambda: serve(c), daemon=True).start()
)PY";

class ApiPorts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_ && server_->ok()); }
  TestServer& s() const { return *server_; }

  static std::string PortPath(const std::string& id, int port, const std::string& rest = "/") {
    return "/v1/sandboxes/" + id + "/ports/" + std::to_string(port) + rest;
  }
  // Writes `text` to `path` inside the sandbox.
  void Put(const std::string& id, const std::string& path, const std::string& text) {
    auto r = s().Client().Request("PUT", "/v1/sandboxes/" + id + "/fs?path=" + path, text,
                                  {{"Content-Type", "application/octet-stream"}});
    ASSERT_EQ(r.status, 201) << r.body;
  }
  // Starts `cmd` as a background process and waits until something
  // answers on `port` through the proxy (anything but 502).
  void StartServer(const std::string& id, const std::string& cmd, int port) {
    auto r = s().Client().Json("POST", "/v1/sandboxes/" + id + "/processes", {{"cmd", cmd}});
    ASSERT_EQ(r.status, 201) << r.body;
    auto c = s().Client();
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      auto p = c.Request("GET", PortPath(id, port, "/__probe__"));
      if (p.status != 502) return;
      ASSERT_EQ(p.json().value("code", ""), "port_unreachable") << p.body;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "nothing answered on port " << port << " in " << id;
  }
  void StartEcho(const std::string& id, int port) {
    Put(id, "/tmp/echo.py", kEchoServer);
    StartServer(id, "python3 /tmp/echo.py " + std::to_string(port), port);
  }

  static TestServer* server_;
};

TestServer* ApiPorts::server_ = nullptr;

// The acceptance case of issue 7: a web server started inside a sandbox
// answers through /v1/sandboxes/{id}/ports/8000/.
TEST_F(ApiPorts, HttpServerInsideTheSandboxAnswersThroughTheProxy) {
  const std::string id = s().CreateSandbox();
  auto mk = s().Exec(id, "mkdir -p /tmp/www && echo hello-from-sandbox > /tmp/www/hello.txt");
  ASSERT_EQ(mk["exit_code"], 0) << mk.dump();
  StartServer(id, "cd /tmp/www && exec python3 -m http.server 8000 --bind 127.0.0.1", 8000);
  auto c = s().Client();
  auto listing = c.Request("GET", PortPath(id, 8000));
  EXPECT_EQ(listing.status, 200) << listing.body;
  EXPECT_NE(listing.body.find("hello.txt"), std::string::npos) << listing.body;
  EXPECT_TRUE(listing.header("content-type").starts_with("text/html"))
      << listing.header("content-type");
  EXPECT_FALSE(listing.header("x-request-id").empty());
  // The same keep-alive connection carries the next request.
  auto file = c.Request("GET", PortPath(id, 8000, "/hello.txt"));
  EXPECT_EQ(file.status, 200);
  EXPECT_EQ(file.body, "hello-from-sandbox\n");
  // The server's own errors pass through as they are (not hutch's JSON).
  auto missing = c.Request("GET", PortPath(id, 8000, "/nope.txt"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(missing.json().is_null() || !missing.json().contains("request_id")) << missing.body;
  // Without the trailing slash the route still reaches the server's root.
  auto bare = c.Request("GET", "/v1/sandboxes/" + id + "/ports/8000");
  EXPECT_EQ(bare.status, 200);
  EXPECT_NE(bare.body.find("hello.txt"), std::string::npos);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A chunked body streamed in pauses arrives whole: every chunk, then the
// end. (A read that consumed only a chunk header once ended the relayed
// body early: E2B's code server's /execute lines were lost.)
TEST_F(ApiPorts, StreamedChunkedResponseArrivesWhole) {
  const std::string id = s().CreateSandbox();
  StartEcho(id, 8090);
  auto r = s().Client().Request("GET", PortPath(id, 8090, "/chunked"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "one\ntwo\nthree\n");
  EXPECT_EQ(s().Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// Method, raw path remainder and query reach the server; hop-by-hop
// headers and hutch's key do not; X-Forwarded-* are added.
TEST_F(ApiPorts, RequestIsRelayedWithPathQueryAndForwardedHeaders) {
  const std::string id = s().CreateSandbox();
  StartEcho(id, 8080);
  auto c = s().Client();
  auto r = c.Request("DELETE", PortPath(id, 8080, "/a%20b//c?x=%zz&y=1+2"), "",
                     {{"X-Custom", "kept"},
                      {"Keep-Alive", "timeout=5"},
                      {"Connection", "keep-alive, X-Drop"},
                      {"X-Drop", "dropped"},
                      {"X-Forwarded-For", "203.0.113.9"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json info = r.json();
  EXPECT_EQ(info["method"], "DELETE");
  EXPECT_EQ(info["path"], "/a%20b//c?x=%zz&y=1+2");
  const json& h = info["headers"];
  EXPECT_EQ(h.value("x-custom", ""), "kept");
  EXPECT_FALSE(h.contains("authorization")) << h.dump();
  EXPECT_FALSE(h.contains("keep-alive")) << h.dump();
  EXPECT_FALSE(h.contains("x-drop")) << h.dump();
  EXPECT_EQ(h.value("x-forwarded-for", ""), "203.0.113.9, 127.0.0.1");
  EXPECT_EQ(h.value("x-forwarded-proto", ""), "http");
  EXPECT_EQ(h.value("x-forwarded-host", ""), "127.0.0.1");
  EXPECT_EQ(h.value("x-forwarded-prefix", ""), "/v1/sandboxes/" + id + "/ports/8080");
  // HEAD: the header only, though it announces the GET's length.
  auto head = c.Request("HEAD", PortPath(id, 8080, "/x"));
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  // And the connection is still usable after it.
  EXPECT_EQ(c.Request("GET", PortPath(id, 8080, "/after-head")).json().value("path", ""),
            "/after-head");
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A 20 MB body goes up and comes back whole (streamed both ways).
TEST_F(ApiPorts, LargeBodyRoundTripsThroughTheProxy) {
  const std::string id = s().CreateSandbox();
  StartEcho(id, 8081);
  const uint64_t total = 20 * kMiB;
  std::string body(total, '\0');
  std::mt19937_64 rng(7);
  for (size_t i = 0; i + 8 <= body.size(); i += 8) {
    uint64_t v = rng();
    memcpy(&body[i], &v, 8);
  }
  const std::string want = Sha256Hex(body);
  auto c = s().Client();
  uint64_t off = 0;
  auto r = c.Upload(PortPath(id, 8081, "/upload"), total, [&](char* buf, size_t max) {
    size_t n = std::min<uint64_t>(max, total - off);
    memcpy(buf, body.data() + off, n);
    off += n;
    return n;
  });
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.header("x-body-sha256"), want);  // what the server received
  EXPECT_EQ(r.body.size(), total);
  EXPECT_EQ(Sha256Hex(r.body), want);  // what came back

  // A download many times larger than the relay's buffers, with hutchd's
  // memory watched: streamed, not buffered.
  const size_t rss_before = s().RssBytes();
  size_t peak = rss_before, got = 0;
  auto d = c.Download(PortPath(id, 8081, "/bytes/" + std::to_string(64 * kMiB)),
                      [&](const char*, size_t n) {
                        got += n;
                        if ((got & (8 * kMiB - 1)) < n) peak = std::max(peak, s().RssBytes());
                      });
  EXPECT_EQ(d.status, 200);
  EXPECT_EQ(got, 64 * kMiB);
  EXPECT_TRUE(hutch::testing::RssWithinBound(rss_before, peak)) << rss_before << " -> " << peak;
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// A WebSocket through the proxy: the 101 comes from the sandbox's server
// and messages echo both ways (text and a 200 KB binary one).
TEST_F(ApiPorts, WebSocketUpgradeIsRelayed) {
  const std::string id = s().CreateSandbox();
  Put(id, "/tmp/ws.py", kWsServer);
  StartServer(id, "python3 /tmp/ws.py 8765", 8765);

  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"),
                             static_cast<unsigned short>(s().port()));
  beast::error_code ec;
  beast::get_lowest_layer(ws).connect(ep, ec);
  ASSERT_FALSE(ec) << ec.message();
  const std::string key = s().key();
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    req.set(http::field::authorization, "Bearer " + key);
  }));
  // Every step has a deadline (asynchronous operations run for a while).
  auto run = [&](auto&& start) {
    bool done = false;
    start([&](beast::error_code e, auto&&...) {
      ec = e;
      done = true;
    });
    io.restart();
    io.run_for(std::chrono::seconds(30));
    return done;
  };
  // One frame per message: the echo server knows no fragmentation.
  ws.auto_fragment(false);
  websocket::response_type res;
  ASSERT_TRUE(
      run([&](auto h) { ws.async_handshake(res, "127.0.0.1", PortPath(id, 8765, "/ws"), h); }));
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 101);

  for (const std::string& msg :
       {std::string("hello through the proxy"), std::string(200 * 1000, 'w')}) {
    ws.binary(msg.size() > 100);
    ASSERT_TRUE(run([&](auto h) { ws.async_write(asio::buffer(msg), h); }));
    ASSERT_FALSE(ec) << ec.message();
    beast::flat_buffer in;
    ASSERT_TRUE(run([&](auto h) { ws.async_read(in, h); }));
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(beast::buffers_to_string(in.data()), msg);
  }
  ASSERT_TRUE(run([&](auto h) { ws.async_close(websocket::close_code::normal, h); }));
  EXPECT_FALSE(ec) << ec.message();
  auto c = s().Client();
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(ApiPorts, ErrorsNameTheirCause) {
  const std::string id = s().CreateSandbox();
  auto c = s().Client();
  // Nothing listens: 502 port_unreachable, retryable.
  auto r = c.Request("GET", PortPath(id, 9999));
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(r.json().value("code", ""), "port_unreachable");
  EXPECT_EQ(r.json().value("retryable", false), true);
  // Bad ports: 400.
  for (const std::string p : {"0", "65536", "abc", "080", "-1", "99999999"}) {
    auto b = c.Request("GET", "/v1/sandboxes/" + id + "/ports/" + p + "/");
    EXPECT_EQ(b.status, 400) << p << ": " << b.body;
    EXPECT_EQ(b.json().value("code", ""), "invalid_request") << p;
  }
  auto noport = c.Request("GET", "/v1/sandboxes/" + id + "/ports");
  EXPECT_EQ(noport.status, 400) << noport.body;
  // Unknown sandbox.
  auto unknown = c.Request("GET", PortPath("sb_00000000deadbeef", 8000));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.json().value("code", ""), "sandbox_not_found");
  // No key or a wrong one: 401 before anything else.
  hutch::client::HttpClient anon("127.0.0.1", s().port());
  auto a = anon.Request("GET", PortPath(id, 9999));
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(a.json().value("code", ""), "unauthorized");
  hutch::client::HttpClient wrong("127.0.0.1", s().port(), "not-a-key");
  EXPECT_EQ(wrong.Request("GET", PortPath(id, 9999)).status, 401);
  // Paused: 409 conflict naming the state; deleted: sandbox_not_running.
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
  auto paused = c.Request("GET", PortPath(id, 9999));
  EXPECT_EQ(paused.status, 409) << paused.body;
  EXPECT_EQ(paused.json().value("code", ""), "conflict");
  EXPECT_NE(paused.json().value("message", "").find("paused"), std::string::npos) << paused.body;
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/resume").status, 200);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  auto gone = c.Request("GET", PortPath(id, 9999));
  EXPECT_EQ(gone.status, 409) << gone.body;
  EXPECT_EQ(gone.json().value("code", ""), "sandbox_not_running");
}

// Deleting the sandbox ends a relay that is still open (a WebSocket whose
// server never closes): the client sees its connection end.
TEST_F(ApiPorts, DeletingTheSandboxEndsOpenRelays) {
  const std::string id = s().CreateSandbox();
  Put(id, "/tmp/ws.py", kWsServer);
  StartServer(id, "python3 /tmp/ws.py 8766", 8766);
  asio::io_context io;
  websocket::stream<beast::tcp_stream> ws(io);
  asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"),
                             static_cast<unsigned short>(s().port()));
  beast::error_code ec;
  beast::get_lowest_layer(ws).connect(ep, ec);
  ASSERT_FALSE(ec);
  const std::string key = s().key();
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    req.set(http::field::authorization, "Bearer " + key);
  }));
  ws.handshake("127.0.0.1", PortPath(id, 8766, "/"), ec);
  ASSERT_FALSE(ec) << ec.message();
  bool done = false;
  beast::flat_buffer in;
  ws.async_read(in, [&](beast::error_code e, size_t) {
    ec = e;
    done = true;
  });
  auto c = s().Client();
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  io.run_for(std::chrono::seconds(30));
  EXPECT_TRUE(done);
  EXPECT_TRUE(ec) << "the read should fail once the sandbox is gone";
}

// E2B: getHost(port) is "{port}-{id}.{domain}"; a request with that Host
// reaches the port, with the sandbox's traffic access token, its envd
// access token or a hutch key; another sandbox's token does not.
TEST_F(ApiPorts, E2bHostHeaderAndSandboxPortHeaderRouteToThePort) {
  auto c = s().Client();
  const std::map<std::string, std::string> e2b_key = {{"X-API-Key", s().key()}};
  auto create = [&]() {
    auto r = c.Request("POST", "/e2b/v2/sandboxes", json{{"templateID", "base"}}.dump(), e2b_key);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json();
  };
  json a = create(), b = create();
  const std::string id = a.value("sandboxID", "");
  ASSERT_FALSE(id.empty());
  const std::string traffic = a.value("trafficAccessToken", "");
  ASSERT_FALSE(traffic.empty()) << a.dump();
  StartEcho(id, 3000);
  const std::string host = "3000-" + id + ".sandbox.hutch.test";

  hutch::client::HttpClient anon("127.0.0.1", s().port());
  auto ok = anon.Request(
      "GET", "/some/path?q=1", "",
      {{"Host", host}, {"e2b-traffic-access-token", traffic}, {"Authorization", "Bearer app"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json().value("path", ""), "/some/path?q=1");
  const json ok_json = ok.json();
  const json& h = ok_json["headers"];
  EXPECT_FALSE(h.contains("e2b-traffic-access-token")) << h.dump();
  EXPECT_EQ(h.value("authorization", ""), "Bearer app");  // the app's own, not hutch's
  EXPECT_EQ(h.value("x-forwarded-host", ""), host);
  // /v1-looking paths belong to the sandbox's server too on such a host.
  auto v1 = anon.Request("GET", "/v1/sandboxes", "",
                         {{"Host", host}, {"e2b-traffic-access-token", traffic}});
  EXPECT_EQ(v1.json().value("path", ""), "/v1/sandboxes") << v1.body;
  // Case-folded like a host name; the listen port after the domain is fine.
  std::string other_id = id;
  other_id.back() = other_id.back() == '0' ? '1' : '0';
  auto mismatch =
      anon.Request("GET", "/", "",
                   {{"Host", "3000-" + other_id + ".x:80"}, {"e2b-traffic-access-token", traffic}});
  EXPECT_EQ(mismatch.status, 401) << "a token opens its own sandbox only: " << mismatch.body;
  std::string upper_id = id;
  for (auto& ch : upper_id) ch = static_cast<char>(toupper(static_cast<unsigned char>(ch)));
  auto folded = anon.Request(
      "GET", "/", "",
      {{"Host", "3000-" + upper_id + ".x:8080"}, {"e2b-traffic-access-token", traffic}});
  EXPECT_EQ(folded.status, 200) << folded.body;
  // Other credentials.
  auto envd = anon.Request("GET", "/", "",
                           {{"Host", host}, {"X-Access-Token", a.value("envdAccessToken", "")}});
  EXPECT_EQ(envd.status, 200) << envd.body;
  auto bykey = anon.Request("GET", "/", "", {{"Host", host}, {"X-API-Key", s().key()}});
  EXPECT_EQ(bykey.status, 200) << bykey.body;
  EXPECT_FALSE(bykey.json()["headers"].contains("x-api-key"));
  // No credential, or the other sandbox's token: 401.
  auto none = anon.Request("GET", "/", "", {{"Host", host}});
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.json().value("code", ""), "unauthorized");
  auto other = anon.Request(
      "GET", "/", "",
      {{"Host", host}, {"e2b-traffic-access-token", b.value("trafficAccessToken", "")}});
  EXPECT_EQ(other.status, 401) << other.body;
  // A port with nothing behind it.
  auto closed = anon.Request(
      "GET", "/", "",
      {{"Host", "3001-" + id + ".sandbox.hutch.test"}, {"e2b-traffic-access-token", traffic}});
  EXPECT_EQ(closed.status, 502) << closed.body;
  // A host that only looks similar is hutch's own API.
  EXPECT_EQ(anon.Request("GET", "/healthz", "", {{"Host", "3000-myhost.example"}}).status, 200);

  // The one-gateway form: /e2b with E2b-Sandbox-Id and a port other than envd's.
  auto gw = anon.Request("POST", "/e2b/echo?z=9", "payload",
                         {{"E2b-Sandbox-Id", id},
                          {"E2b-Sandbox-Port", "3000"},
                          {"e2b-traffic-access-token", traffic}});
  ASSERT_EQ(gw.status, 200) << gw.body;
  EXPECT_EQ(gw.body, "payload");
  auto gw_info = anon.Request(
      "GET", "/e2b/echo?z=9", "",
      {{"E2b-Sandbox-Id", id}, {"E2b-Sandbox-Port", "3000"}, {"X-API-Key", s().key()}});
  EXPECT_EQ(gw_info.json().value("path", ""), "/echo?z=9") << gw_info.body;
  EXPECT_EQ(gw_info.json()["headers"].value("x-forwarded-prefix", ""), "/e2b");
  EXPECT_FALSE(gw_info.json()["headers"].contains("e2b-sandbox-id"));
  auto gw_none =
      anon.Request("GET", "/e2b/echo", "", {{"E2b-Sandbox-Id", id}, {"E2b-Sandbox-Port", "3000"}});
  EXPECT_EQ(gw_none.status, 401);
  // envd's port still goes to envd.
  auto health = anon.Request("GET", "/e2b/health", "",
                             {{"E2b-Sandbox-Id", id}, {"E2b-Sandbox-Port", "49983"}});
  EXPECT_EQ(health.status, 204) << health.body;

  for (const json& sb : {a, b})
    EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + sb.value("sandboxID", "")).status, 204);
}

}  // namespace
