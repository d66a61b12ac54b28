// Design item 6 (security-and-reliability.md): the API. Every route of
// every dialect, enumerated from the routers (src/api/router.cc,
// v1_processes.cc, v1_snapshots.cc, v1_volumes.cc, e2b/e2b_control.cc,
// e2b/e2b_envd.cc), answers 401 without a key and with a wrong one, and
// does nothing: the sandbox the calls name is still running and unchanged
// afterwards. The control: the same route with the right key is not 401.
// The only open routes are the documented probes (GET /healthz, GET
// /metrics, envd's /e2b/health) and the web console's static assets
// (GET /ui/…), which hold no data. The agent's protocol is never reachable
// from outside: no HTTP route speaks it, and its socket is a host path that
// only hutchd's user can open.
//
// One tenant's sandboxes being invisible to another's key: tenants_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/support/api_routes.h"
#include "tests/support/host_probe.h"
#include "tests/support/shared_server.h"

using namespace std::string_literals;
using hutch::client::HttpClient;
using hutch::client::Response;
using hutch::testing::E2bControlRoutes;
using hutch::testing::EnvdRoutes;
using hutch::testing::Fill;
using hutch::testing::HostSh;
using hutch::testing::Route;
using hutch::testing::V1Routes;
using nlohmann::json;

namespace {

// The control call of a route with the right key must not change
// anything: other ids, and a malformed body for the routes that create.
Route Harmless(Route r) {
  if (r.method == "POST" && r.path.find('{') == std::string::npos) r.body = "{";
  return r;
}

class Api : public hutch::testing::SharedServerTest {
 protected:
  static void SetUpTestSuite() {
    SharedServerTest::SetUpTestSuite();
    if (sandbox().empty()) return;
    auto c = server().Client();
    c.Json("POST", "/v1/volumes", {{"name", "authvol"}, {"size_mb", 16}});
    c.Request("PUT", "/v1/volumes/authvol/fs?path=/keep", "keep");
    auto t = c.Request("GET", "/e2b/sandboxes/" + sandbox(), "", {{"X-API-Key", server().key()}});
    token_ = t.json().is_object() ? t.json().value("envdAccessToken", "") : "";
    other_ = server().CreateSandbox();
    auto o = c.Request("GET", "/e2b/sandboxes/" + other_, "", {{"X-API-Key", server().key()}});
    other_token_ = o.json().is_object() ? o.json().value("envdAccessToken", "") : "";
  }

  // Sends the route naming the real sandbox and volume (real) or ids that
  // do not exist.
  static Response Send(const Route& r, bool real, const std::map<std::string, std::string>& headers,
                       const std::string& bearer = "") {
    HttpClient c("127.0.0.1", server().port(), bearer);
    auto h = headers;
    if (!r.body.empty() && !h.count("Content-Type"))
      h["Content-Type"] = r.body == "x" ? "application/octet-stream" : "application/json";
    return c.Request(r.method, Fill(r.path, real, sandbox()), r.body, h);
  }

  // Nothing the refused calls named changed: the sandbox runs, holds no
  // /tmp/pwned, has its hostname file; the volume keeps its file; no
  // sandbox or volume was added.
  static void ExpectNothingHappened() {
    auto c = server().Client();
    auto st = c.Request("GET", "/v1/sandboxes/" + sandbox());
    EXPECT_EQ(st.json().value("status", ""), "running") << st.body;
    EXPECT_EQ(Sh("ls /tmp/pwned 2>/dev/null; test -s /etc/hostname && echo ok"), "ok\n");
    EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), 2u);
    EXPECT_EQ(c.Request("GET", "/v1/volumes/authvol/fs?path=/keep").body, "keep");
    EXPECT_EQ(c.Request("GET", "/v1/volumes").body.find("pwned"), std::string::npos);
  }

  static inline std::string token_, other_, other_token_;
};

}  // namespace

TEST_F(Api, EveryV1RouteWithoutAKeyIs401) {
  for (const auto& r : V1Routes()) {
    for (const std::string& key : {""s, "wrong-key"s, server().key() + "x"}) {
      auto res = Send(r, true, {}, key);
      EXPECT_EQ(res.status, 401) << r.method << " " << r.path << " key '" << key
                                 << "': " << res.body;
      EXPECT_EQ(res.json().is_object() ? res.json().value("code", "") : "", "unauthorized")
          << res.body;
    }
    // The E2B key header is no key for /v1.
    auto e2b_header = Send(r, true, {{"X-API-Key", server().key()}});
    EXPECT_EQ(e2b_header.status, 401) << r.method << " " << r.path;
    // Control: the route exists and the right key gets past auth (on an id
    // that does not exist, so the call changes nothing).
    auto ok = Send(Harmless(r), false, {}, server().key());
    EXPECT_NE(ok.status, 401) << r.method << " " << r.path << ": " << ok.body;
  }
  ExpectNothingHappened();
}

TEST_F(Api, EveryE2bControlRouteWithoutAKeyIs401) {
  for (const auto& r : E2bControlRoutes()) {
    for (const std::string& key : {""s, "wrong-key"s, "e2b_0123456789abcdef"s}) {
      std::map<std::string, std::string> h;
      if (!key.empty()) h["X-API-Key"] = key;
      auto res = Send(r, true, h);
      EXPECT_EQ(res.status, 401) << r.method << " " << r.path << " key '" << key
                                 << "': " << res.body;
    }
    // A /v1 bearer key is no X-API-Key.
    EXPECT_EQ(Send(r, true, {}, server().key()).status, 401) << r.method << " " << r.path;
    auto ok = Send(Harmless(r), false, {{"X-API-Key", server().key()}});
    EXPECT_NE(ok.status, 401) << r.method << " " << r.path << ": " << ok.body;
  }
  ExpectNothingHappened();
}

TEST_F(Api, EveryEnvdRouteWithoutTheSandboxTokenIs401) {
  ASSERT_FALSE(token_.empty());
  ASSERT_FALSE(other_token_.empty());
  for (const auto& r : EnvdRoutes()) {
    // No token, a wrong one, the neighbour's, and the API key itself.
    for (const std::string& tok : {""s, "wrong"s, other_token_, server().key()}) {
      std::map<std::string, std::string> h = {{"E2b-Sandbox-Id", sandbox()}};
      if (!tok.empty()) h["X-Access-Token"] = tok;
      if (r.path.find("process.Process/Start") != std::string::npos ||
          r.path.find("process.Process/Connect") != std::string::npos ||
          r.path.find("WatchDir") != std::string::npos)
        h["Content-Type"] = "application/connect+json";
      auto res = Send(r, true, h, server().key());
      EXPECT_EQ(res.status, 401) << r.method << " " << r.path << " token '" << tok
                                 << "': " << res.body;
    }
  }
  // Control: the right token reads a file.
  auto ok = Send({"GET", "/e2b/files?path=/etc/hostname"}, true,
                 {{"E2b-Sandbox-Id", sandbox()}, {"X-Access-Token", token_}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  ExpectNothingHappened();
}

TEST_F(Api, OnlyTheDocumentedProbesAreOpen) {
  HttpClient c("127.0.0.1", server().port());
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
  EXPECT_EQ(c.Request("GET", "/metrics").status, 200);
  auto health = c.Request("GET", "/e2b/health", "", {{"E2b-Sandbox-Id", sandbox()}});
  EXPECT_EQ(health.status, 204) << health.body;
  // They give no sandbox away: no id, no key, no path.
  for (const char* p : {"/healthz", "/metrics"}) {
    auto r = c.Request("GET", p);
    EXPECT_EQ(r.body.find(sandbox()), std::string::npos) << p;
    EXPECT_EQ(r.body.find(server().key()), std::string::npos) << p;
    EXPECT_EQ(r.body.find(server().state_dir()), std::string::npos) << p;
  }
  // The console's page and assets: open, and as free of data as the probes
  // (404 where this build has no console).
  auto ui = c.Request("GET", "/ui/");
  EXPECT_TRUE(ui.status == 200 || ui.status == 404) << ui.status << " " << ui.body;
  EXPECT_EQ(ui.body.find(sandbox()), std::string::npos);
  EXPECT_EQ(ui.body.find(server().key()), std::string::npos);
  EXPECT_EQ(c.Request("POST", "/ui/").status, 405);
  // Anything else outside /v1 and /e2b is 404, not an open door.
  EXPECT_EQ(c.Request("GET", "/").status, 404);
  EXPECT_EQ(c.Request("POST", "/healthz").status, 405);
}

TEST_F(Api, AgentInternalRoutesAreNeverReachableFromOutside) {
  // No HTTP route speaks the agent protocol or proxies its socket.
  auto c = server().Client();
  const std::string sb = "/v1/sandboxes/" + sandbox();
  for (const std::string& p :
       std::vector<std::string>{"/agent", "/v1/agent", sb + "/agent", sb + "/agent.sock",
                                sb + "/frames", "/e2b/agent", "/internal"}) {
    for (const char* m : {"GET", "POST"}) {
      auto r = c.Request(m, p, "");
      // 404, or 401 where the dialect checks its own key first (/e2b).
      EXPECT_TRUE(r.status == 404 || r.status == 401)
          << m << " " << p << ": " << r.status << " " << r.body;
    }
  }
  // The agent has no TCP listener: inside the sandbox no socket listens
  // (state 0A) on TCP or TCP6.
  EXPECT_EQ(Sh("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == \"0A\"' | wc -l"), "0\n");
  // Its socket is a host path under the state dir, which only hutchd's user
  // may enter. (A vm sandbox's is QEMU's end of the virtio-serial port, in
  // the vm driver's dir, owned by the vm user QEMU runs as; the dirs above
  // it are root's and closed to every other user all the same.)
  const std::string sock = hutch::testing::probe::SandboxDirOf(server(), sandbox()) + "/agent.sock";
  struct stat st;
  ASSERT_EQ(lstat(sock.c_str(), &st), 0) << sock;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  bool closed_to_others = false;
  for (std::string p = sock; p.size() > server().state_dir().size();
       p = p.substr(0, p.rfind('/'))) {
    struct stat d;
    if (stat(p.c_str(), &d) == 0 && (d.st_mode & 0007) == 0 && d.st_uid == getuid())
      closed_to_others = true;
  }
  EXPECT_TRUE(closed_to_others) << HostSh("ls -ld " + sock + " $(dirname " + sock + ") " +
                                          server().state_dir() + "/state " + server().state_dir() +
                                          "/state/sandboxes");
}
