// hutchd over HTTPS (--tls-listen) against the real server: its own CA
// (<state-dir>/tls/ca.pem) is what curl trusts, for the loopback address
// and for {port}-{id}.D under --domain; clients refuse a certificate for
// another host, an expired one, or a CA they do not trust; the HTTP and
// HTTPS listeners serve the same API (create, exec, an SSE stream, a
// streamed upload and download, the PTY WebSocket, the port proxy and
// an upgraded connection through it); a sandbox's own host name verifies
// for curl and for Python's ssl (a per-name certificate by SNI); a
// stalled handshake is cut at the first-header deadline; and a
// certificate near its end is reissued on restart under the same CA.
// HTTPS is driven by curl (the client users run), Python's ssl (raw
// upgrade, OpenSSL's hostname check) and, for the WebSocket, a Beast
// client over OpenSSL.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "server/cert_maker.h"
#include "tests/support/test_server.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using hutch::testing::HostSh;
using hutch::testing::TempDir;
using hutch::testing::TestServer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char* kDomain = "sandbox.test";

struct CurlResult {
  int rc = -1;      // curl's exit code: 0, or 60 when the peer's certificate is refused
  std::string out;  // stdout (the body, then what -w printed)
};

// Runs curl with `args` (shell words, already quoted).
CurlResult Curl(const std::string& args) {
  const std::string marker = "\n__curl_rc=";
  std::string out = HostSh("curl -sS --max-time 120 " + args + " 2>/dev/null; printf '" + "\\n" +
                           "__curl_rc=%d' $?");
  CurlResult r;
  const size_t at = out.rfind(marker);
  if (at == std::string::npos) return r;
  r.rc = std::stoi(out.substr(at + marker.size()));
  r.out = out.substr(0, at);
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first HTTPS port hutchd published in <state>/hutchd.tls-addr.
int TlsPort(const TestServer& s) {
  std::ifstream in(s.state_dir() + "/state/hutchd.tls-addr");
  std::string addr;
  if (!(in >> addr)) return 0;
  return std::stoi(addr.substr(addr.rfind(':') + 1));
}

std::string CaPath(const TestServer& s) { return s.state_dir() + "/state/tls/ca.pem"; }

// One listener of a server, as the tests address it.
struct Endpoint {
  bool tls = false;
  int port = 0;
  std::string ca;  // the CA curl trusts (TLS)
  std::string key;

  std::string Base() const {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
  }
  std::string Args() const {
    std::string a = "-H 'Authorization: Bearer " + key + "' ";
    if (tls) a += "--cacert '" + ca + "' ";
    return a;
  }
  // A request whose answer is JSON; `status` gets the HTTP status.
  json Json(const std::string& method, const std::string& path, const json& body,
            int* status) const {
    auto r = Curl(Args() + "-X " + method + " -H 'Content-Type: application/json' --data-raw '" +
                  body.dump() + "' -w '\\n%{http_code}' '" + Base() + path + "'");
    EXPECT_EQ(r.rc, 0) << r.out;
    const size_t nl = r.out.rfind('\n');
    *status = nl == std::string::npos ? 0 : std::atoi(r.out.c_str() + nl + 1);
    return json::parse(r.out.substr(0, nl == std::string::npos ? 0 : nl), nullptr, false);
  }
};

class ApiTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer({"--tls-listen", "127.0.0.1:0", "--domain", kDomain});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(s().ok()) << s().Log();
    tls_port_ = TlsPort(s());
    ASSERT_GT(tls_port_, 0) << s().Log();
  }
  static TestServer& s() { return *server_; }
  std::string Https(const std::string& host, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(tls_port_) + path;
  }
  std::string Resolve(const std::string& host) const {
    return "--resolve '" + host + ":" + std::to_string(tls_port_) + ":127.0.0.1' ";
  }
  Endpoint Plain() const { return {false, s().port(), "", s().key()}; }
  Endpoint Secure() const { return {true, tls_port_, CaPath(s()), s().key()}; }

  static TestServer* server_;
  int tls_port_ = 0;
};

TestServer* ApiTls::server_ = nullptr;

TEST_F(ApiTls, CurlTrustingTheOwnCaReachesTheApi) {
  auto r = Curl("--cacert '" + CaPath(s()) + "' -w '%{http_code}' -o /dev/null " +
                Https("127.0.0.1", "/healthz"));
  EXPECT_EQ(r.rc, 0) << s().Log();
  EXPECT_EQ(r.out, "200");
  // The wildcard: {port}-{id}.D verifies (and reaches hutchd).
  const std::string host = std::string("49983-x.") + kDomain;
  r = Curl("--cacert '" + CaPath(s()) + "' " + Resolve(host) + "-w '%{http_code}' -o /dev/null " +
           Https(host, "/healthz"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "200");
  // HTTP/1.1 by ALPN, TLS 1.2 or newer.
  r = Curl("--cacert '" + CaPath(s()) + "' -o /dev/null -w '%{http_version}' " +
           Https("localhost", "/healthz"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "1.1");
  r = Curl("--cacert '" + CaPath(s()) + "' --tls-max 1.1 -o /dev/null " +
           Https("127.0.0.1", "/healthz"));
  EXPECT_NE(r.rc, 0) << "TLS 1.1 accepted";
  // Where ca.pem is, said at start.
  EXPECT_NE(s().Log().find("tls_ca path=" + CaPath(s())), std::string::npos) << s().Log();
}

TEST_F(ApiTls, ClientsRefuseAnotherHostAndAnUntrustedCa) {
  // curl's 60: the peer's certificate could not be verified.
  for (const std::string& host :
       {std::string("other.example.invalid"), std::string("a.b.") + kDomain}) {
    auto r = Curl("--cacert '" + CaPath(s()) + "' " + Resolve(host) + "-o /dev/null " +
                  Https(host, "/healthz"));
    EXPECT_EQ(r.rc, 60) << host;
  }
  // Without --cacert: the system's CAs do not include hutchd's.
  auto r = Curl("-o /dev/null " + Https("127.0.0.1", "/healthz"));
  EXPECT_EQ(r.rc, 60);
  // Plain HTTP on the TLS port is not served.
  r = Curl("-o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(tls_port_) +
           "/healthz");
  EXPECT_NE(r.out, "200");
}

// A client that connects and never starts the TLS handshake is closed at
// the unauthenticated first-header deadline (10 s by default), as a
// plain one sending no header is.
TEST_F(ApiTls, StalledHandshakeIsClosedAtTheFirstHeaderDeadline) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(tls_port_));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  // Far beyond the deadline: a read that times out means nobody closed it.
  timeval tv{120, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  const ssize_t n = recv(fd, &c, 1, 0);
  EXPECT_EQ(n, 0) << "errno " << errno;
  close(fd);
}

// The PTY WebSocket over `ws` (connected, TLS handshaken if any): a shell
// answers, and its exit arrives as the text message before the close.
template <class Ws>
void ExpectShellAnswers(asio::io_context& io, Ws& ws, const std::string& target,
                        const std::string& key) {
  ws.set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
    req.set(http::field::authorization, "Bearer " + key);
  }));
  websocket::response_type res;
  beast::error_code ec;
  bool done = false;
  ws.async_handshake(res, "127.0.0.1", target, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  io.restart();
  io.run_for(std::chrono::seconds(30));
  ASSERT_TRUE(done && !ec) << ec.message() << " " << res.result_int() << " " << res.body();
  ws.binary(true);
  ws.write(asio::buffer(std::string("echo $((6*7)); exit 3\n")), ec);
  ASSERT_FALSE(ec) << ec.message();
  std::string out;
  json exit_msg;
  beast::flat_buffer buf;
  bool closed = false;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!closed && Clock::now() < deadline) {
    bool got = false;
    ws.async_read(buf, [&](beast::error_code e, size_t) {
      got = true;
      if (e) {
        closed = true;
        return;
      }
      std::string msg = beast::buffers_to_string(buf.data());
      buf.consume(buf.size());
      if (ws.got_text()) exit_msg = json::parse(msg, nullptr, false);
      else out += msg;
    });
    io.restart();
    while (!got && Clock::now() < deadline) io.run_one_for(std::chrono::seconds(1));
    if (!got) break;
  }
  EXPECT_TRUE(closed) << out;
  EXPECT_NE(out.find("42"), std::string::npos) << out;
  EXPECT_EQ(exit_msg["exit"]["exit_code"], 3) << exit_msg.dump();
}

void PtyOver(const Endpoint& ep, const std::string& id) {
  asio::io_context io;
  asio::ip::tcp::endpoint addr(asio::ip::make_address("127.0.0.1"),
                               static_cast<unsigned short>(ep.port));
  const std::string target = "/v1/sandboxes/" + id + "/pty";
  if (!ep.tls) {
    websocket::stream<beast::tcp_stream> ws(io);
    beast::get_lowest_layer(ws).connect(addr);
    ExpectShellAnswers(io, ws, target, ep.key);
    return;
  }
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(ep.ca);
  ctx.set_verify_mode(ssl::verify_peer);
  ctx.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
  websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(io, ctx);
  beast::get_lowest_layer(ws).connect(addr);
  beast::error_code ec;
  ws.next_layer().handshake(ssl::stream_base::client, ec);
  ASSERT_FALSE(ec) << ec.message();
  ExpectShellAnswers(io, ws, target, ep.key);
}

// A TLS handshake by Python's ssl module (OpenSSL's verifier) asking for
// `host` and trusting the endpoint's CA: "verified\n", or the error.
std::string PythonHandshake(const Endpoint& ep, const std::string& host) {
  const std::string py =
      "import socket, ssl, sys\n"
      "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
      "raw = socket.create_connection(('127.0.0.1', int(sys.argv[2])))\n"
      "try:\n"
      "    ctx.wrap_socket(raw, server_hostname=sys.argv[3]).close()\n"
      "    print('verified')\n"
      "except ssl.SSLError as e:\n"
      "    print(e)\n";
  return HostSh("python3 -c \"" + py + "\" '" + ep.ca + "' " + std::to_string(ep.port) + " '" +
                host + "' 2>&1");
}

// A server for the sandbox that answers an "Upgrade: echo" with a 101 and
// then sends every byte back (anything else: 200 "ok").
constexpr const char* kUpgradeEcho = R"PY(
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
while True:
    c, _ = s.accept()
    d = b""
    while b"\r\n\r\n" not in d:
        x = c.recv(4096)
        if not x:
            break
        d += x
    if b"upgrade: echo" not in d.lower():
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        c.close()
        continue
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
    rest = d.split(b"\r\n\r\n", 1)[1]
    if rest:
        c.sendall(rest)
    while True:
        x = c.recv(65536)
        if not x:
            break
        c.sendall(x)
    c.close()
)PY";

// Its client on the host, plain or TLS (argv: CA or "-", port, key,
// target): prints the status line and whether 100 KB came back.
constexpr const char* kUpgradeClient = R"PY(
import socket, ssl, sys
ca, port, key, target = sys.argv[1:5]
s = socket.create_connection(("127.0.0.1", int(port)))
if ca != "-":
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname="127.0.0.1")
s.sendall(("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key +
           "\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n").encode())
d = b""
while b"\r\n\r\n" not in d:
    x = s.recv(4096)
    if not x:
        break
    d += x
head, _, got = d.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
msg = bytes(range(256)) * 400
s.sendall(msg)
while len(got) < len(msg):
    x = s.recv(65536)
    if not x:
        break
    got += x
print("echoed" if got == msg else "short %d" % len(got))
)PY";

// Everything a client does, on one listener: the same answers on both.
void ExerciseApi(const Endpoint& ep) {
  SCOPED_TRACE(ep.Base());
  int status = 0;
  json created = ep.Json("POST", "/v1/sandboxes", json::object(), &status);
  ASSERT_EQ(status, 201) << created.dump();
  const std::string id = created.value("id", "");
  const std::string sb = "/v1/sandboxes/" + id;

  json ran = ep.Json("POST", sb + "/exec", {{"cmd", "echo hello-$((40+2))"}}, &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(ran.value("stdout", ""), "hello-42\n") << ran.dump();

  // SSE: events arrive and the stream ends with exit.
  auto sse = Curl(ep.Args() + "-N -X POST -H 'Content-Type: application/json' --data-raw '" +
                  json{{"cmd", "for i in 1 2 3; do echo line$i; sleep 0.1; done"}}.dump() + "' '" +
                  ep.Base() + sb + "/exec/stream'");
  EXPECT_EQ(sse.rc, 0);
  EXPECT_NE(sse.out.find("event: start"), std::string::npos) << sse.out;
  EXPECT_NE(sse.out.find("line3"), std::string::npos) << sse.out;
  EXPECT_NE(sse.out.find("event: exit"), std::string::npos) << sse.out;

  // A few MB up and down, streamed, byte for byte.
  const std::string dir = TempDir("hutch-tls");
  HostSh("head -c 5000000 /dev/urandom > " + dir + "/up");
  auto up =
      Curl(ep.Args() + "-X PUT -H 'Content-Type: application/octet-stream' --data-binary @" + dir +
           "/up -w '%{http_code}' -o /dev/null '" + ep.Base() + sb + "/fs?path=/tmp/big'");
  EXPECT_EQ(up.rc, 0);
  EXPECT_EQ(up.out, "201");
  auto down = Curl(ep.Args() + "-o " + dir + "/down -w '%{http_code}' '" + ep.Base() + sb +
                   "/fs?path=/tmp/big'");
  EXPECT_EQ(down.rc, 0);
  EXPECT_EQ(down.out, "200");
  const std::string want = HostSh("sha256sum < " + dir + "/up | cut -d' ' -f1");
  EXPECT_EQ(want.size(), 65u);
  EXPECT_EQ(HostSh("sha256sum < " + dir + "/down | cut -d' ' -f1"), want);
  json inside =
      ep.Json("POST", sb + "/exec", {{"cmd", "sha256sum < /tmp/big | head -c 64; echo"}}, &status);
  EXPECT_EQ(inside.value("stdout", ""), want);
  std::filesystem::remove_all(dir);

  PtyOver(ep, id);

  if (ep.tls) {
    // The sandbox's own host name verifies against the wildcard (curl
    // matches a label with '_' too; see tls_cert_test for OpenSSL's).
    const std::string host = "49983-" + id + "." + kDomain;
    const std::string hp = host + ":" + std::to_string(ep.port);
    auto named = Curl("--cacert '" + ep.ca + "' --resolve " + hp + ":127.0.0.1 -o /dev/null " +
                      "-w '%{http_code}' https://" + hp + "/health");
    EXPECT_EQ(named.rc, 0) << host;
    EXPECT_NE(named.out, "000");
    // OpenSSL's own verifier (Python's ssl) does not take '_' under a
    // wildcard: hutchd presents a certificate for exactly this name.
    EXPECT_EQ(PythonHandshake(ep, host), "verified\n");
    EXPECT_NE(PythonHandshake(ep, std::string("x_y.") + kDomain).find("CERTIFICATE_VERIFY_FAILED"),
              std::string::npos);
  }

  // The port proxy to a server inside the sandbox.
  ep.Json("POST", sb + "/exec", {{"cmd", "mkdir -p /tmp/www && echo proxied > /tmp/www/hi.txt"}},
          &status);
  ep.Json("POST", sb + "/processes",
          {{"cmd", "cd /tmp/www && exec python3 -m http.server 8000 --bind 127.0.0.1"}}, &status);
  EXPECT_EQ(status, 201);
  CurlResult page;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  do {
    page = Curl(ep.Args() + "'" + ep.Base() + sb + "/ports/8000/hi.txt'");
    if (page.out == "proxied\n") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < deadline);
  EXPECT_EQ(page.rc, 0);
  EXPECT_EQ(page.out, "proxied\n");

  // An upgraded connection through the proxy: a byte pipe both ways.
  const std::string tmp = TempDir("hutch-tls-up");
  std::ofstream(tmp + "/srv.py") << kUpgradeEcho;
  std::ofstream(tmp + "/cli.py") << kUpgradeClient;
  auto put = Curl(ep.Args() + "-X PUT --data-binary @" + tmp + "/srv.py -o /dev/null -w " +
                  "'%{http_code}' '" + ep.Base() + sb + "/fs?path=/tmp/srv.py'");
  EXPECT_EQ(put.out, "201");
  ep.Json("POST", sb + "/processes", {{"cmd", "python3 /tmp/srv.py 8766"}}, &status);
  EXPECT_EQ(status, 201);
  const auto up_deadline = Clock::now() + std::chrono::seconds(30);
  do {
    page = Curl(ep.Args() + "'" + ep.Base() + sb + "/ports/8766/'");
    if (page.out == "ok") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < up_deadline);
  EXPECT_EQ(page.out, "ok");
  EXPECT_EQ(HostSh("python3 " + tmp + "/cli.py '" + (ep.tls ? ep.ca : std::string("-")) + "' " +
                   std::to_string(ep.port) + " '" + ep.key + "' " + sb + "/ports/8766/ 2>&1"),
            "HTTP/1.1 101 Switching Protocols\nechoed\n");
  std::filesystem::remove_all(tmp);

  auto del = Curl(ep.Args() + "-X DELETE -w '%{http_code}' '" + ep.Base() + sb + "'");
  EXPECT_EQ(del.out, "204");
}

TEST_F(ApiTls, PlainListenerServesTheApi) { ExerciseApi(Plain()); }

TEST_F(ApiTls, TlsListenerServesTheSameApi) { ExerciseApi(Secure()); }

// The operator's certificate (--tls-cert) is presented as given: an
// expired one is refused by curl even from a trusted CA.
TEST(ApiTlsFiles, ExpiredOperatorCertificateIsRefused) {
  namespace srv = hutch::server;
  const std::string dir = TempDir("hutch-tls-files");
  auto ca = srv::MakeCa("test operator CA", std::chrono::hours(24));
  ASSERT_TRUE(ca.ok());
  auto expired = srv::IssueServerCert(*ca, {"localhost", "127.0.0.1"}, std::chrono::seconds(-60));
  ASSERT_TRUE(expired.ok());
  std::ofstream(dir + "/ca.pem") << srv::CertPem(ca->cert.get()).value();
  std::ofstream(dir + "/cert.pem") << srv::CertPem(expired->cert.get()).value();
  std::ofstream(dir + "/key.pem") << srv::KeyPem(expired->key.get()).value();
  TestServer s({"--tls-listen", "127.0.0.1:0", "--tls-cert", dir + "/cert.pem", "--tls-key",
                dir + "/key.pem"});
  ASSERT_TRUE(s.ok()) << s.Log();
  const int port = TlsPort(s);
  ASSERT_GT(port, 0);
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/healthz";
  auto r = Curl("--cacert " + dir + "/ca.pem -o /dev/null " + url);
  EXPECT_EQ(r.rc, 60);
  // The same CA, certificate aside, is what curl trusts: only the date fails.
  r = Curl("--cacert " + dir + "/ca.pem -o /dev/null -w '%{http_code}' --insecure " + url);
  EXPECT_EQ(r.out, "200");
  EXPECT_FALSE(std::filesystem::exists(s.state_dir() + "/state/tls/ca.pem"));
  std::filesystem::remove_all(dir);
}

// A server certificate near its end is reissued at start, under the same
// CA; a new --domain reissues it too.
TEST(ApiTlsRenewal, NearExpiryCertificateIsReplacedOnRestart) {
  // One hour of life: due for renewal under the default 30 days.
  TestServer s({"--tls-listen", "127.0.0.1:0", "--domain", kDomain, "--tls-cert-validity", "3600",
                "--tls-renew-before", "60"});
  ASSERT_TRUE(s.ok()) << s.Log();
  const std::string tls = s.state_dir() + "/state/tls";
  const std::string ca_before = ReadFile(tls + "/ca.pem");
  const std::string cert_before = ReadFile(tls + "/server.pem");
  ASSERT_FALSE(cert_before.empty());
  EXPECT_NE(HostSh("openssl x509 -noout -checkend 7200 -in " + tls + "/server.pem"),
            "Certificate will not expire\n");

  s.Stop();
  s.SetArgs({"--tls-listen", "127.0.0.1:0", "--domain", kDomain});
  s.Restart();
  ASSERT_TRUE(s.ok()) << s.Log();
  EXPECT_EQ(ReadFile(tls + "/ca.pem"), ca_before);
  EXPECT_NE(ReadFile(tls + "/server.pem"), cert_before);
  EXPECT_EQ(HostSh("openssl x509 -noout -checkend " + std::to_string(60 * 86400) + " -in " + tls +
                   "/server.pem"),
            "Certificate will not expire\n");
  EXPECT_EQ(HostSh("openssl verify -CAfile " + tls + "/ca.pem " + tls + "/server.pem"),
            tls + "/server.pem: OK\n");
  EXPECT_NE(s.Log().find("tls_cert_issued reason=expiring"), std::string::npos) << s.Log();
  const int port = TlsPort(s);
  const std::string host = "49983-x." + std::string(kDomain);
  auto r = Curl("--cacert " + tls + "/ca.pem --resolve " + host + ":" + std::to_string(port) +
                ":127.0.0.1 -o /dev/null -w '%{http_code}' https://" + host + ":" +
                std::to_string(port) + "/healthz");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "200");

  // Another domain: reissued for it, same CA.
  s.Stop();
  s.SetArgs({"--tls-listen", "127.0.0.1:0", "--domain", "other.test"});
  s.Restart();
  ASSERT_TRUE(s.ok()) << s.Log();
  EXPECT_EQ(ReadFile(tls + "/ca.pem"), ca_before);
  EXPECT_NE(s.Log().find("tls_cert_issued reason=names_changed"), std::string::npos);
  const int port2 = TlsPort(s);
  r = Curl("--cacert " + tls + "/ca.pem --resolve 1-x.other.test:" + std::to_string(port2) +
           ":127.0.0.1 -o /dev/null -w '%{http_code}' https://1-x.other.test:" +
           std::to_string(port2) + "/healthz");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "200");
}

// The daily check, run every second here with every certificate due:
// a running hutchd reissues the certificate and new connections get the
// new one, under the same CA.
TEST(ApiTlsRenewal, RunningServerSwapsInTheReissuedCertificate) {
  TestServer s({"--tls-listen", "127.0.0.1:0", "--tls-cert-validity", "3600", "--tls-renew-before",
                "7200", "--tls-check-every", "1"});
  ASSERT_TRUE(s.ok()) << s.Log();
  const int port = TlsPort(s);
  const std::string tls = s.state_dir() + "/state/tls";
  auto serial = [&] {
    return HostSh("openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
                  " </dev/null 2>/dev/null | openssl x509 -noout -serial");
  };
  const std::string first = serial();
  ASSERT_EQ(first.rfind("serial=", 0), 0u) << first;
  // Wait for a reissue after the one at start.
  auto issued = [&] {
    const std::string log = s.Log();
    size_t n = 0;
    for (size_t at = log.find("tls_cert_issued"); at != std::string::npos;
         at = log.find("tls_cert_issued", at + 1))
      ++n;
    return n;
  };
  const size_t at_start = issued();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (issued() <= at_start && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_GT(issued(), at_start) << s.Log();
  EXPECT_NE(s.Log().find("tls_cert_issued reason=expiring"), std::string::npos);
  const std::string later = serial();
  EXPECT_EQ(later.rfind("serial=", 0), 0u) << later;
  EXPECT_NE(later, first);
  auto r = Curl("--cacert " + tls + "/ca.pem -o /dev/null -w '%{http_code}' https://127.0.0.1:" +
                std::to_string(port) + "/healthz");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "200");
}

}  // namespace
