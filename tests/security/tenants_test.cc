// Issue 32 #13: tenants. Keys have roles; a tenant key sees and touches
// only what its tenant created, through every dialect and the port proxy,
// and another tenant's things read exactly like things that do not exist.
// Per-sandbox tokens derive from a server secret kept outside state.db.
// Keys rotate without a restart (keys file + SIGHUP).
//
// The server runs with a keys file: the admin key, two keys of tenant
// "alice" and one of tenant "bob".
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "tests/support/api_routes.h"
#include "tests/support/test_server.h"

using namespace std::string_literals;
using hutch::client::HttpClient;
using hutch::client::Response;
using hutch::testing::Fill;
using hutch::testing::Route;
using hutch::testing::TestServer;
using nlohmann::json;

namespace {

const std::string kAdmin = "admin-key-0123456789";
const std::string kAlice1 = "alice-key-one-0123456789";
const std::string kAlice2 = "alice-key-two-0123456789";
const std::string kBob = "bob-key-0123456789";

std::string KeysFileText(bool with_alice1) {
  std::string s = "# test keys\n" + kAdmin + "\n";
  if (with_alice1) s += kAlice1 + " tenant=alice\n";
  s += kAlice2 + " tenant=alice role=tenant\n";
  s += kBob + " tenant=bob\n";
  return s;
}

std::string WriteKeysFile(bool with_alice1) {
  static const std::string path = [] {
    char tmpl[] = "/tmp/hutch-tenant-keys-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    return std::string(tmpl);
  }();
  std::ofstream(path) << KeysFileText(with_alice1);
  return path;
}

class Tenants : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    keys_file_ = WriteKeysFile(true);
    server_ = new TestServer({"--keys-file", keys_file_}, /*with_env_key=*/false);
    ASSERT_TRUE(server_->ok()) << server_->Log();
    HttpClient alice = As(kAlice1);
    auto r = alice.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
    ASSERT_EQ(r.status, 201) << r.body;
    alice_sb_ = r.json()["id"];
    auto v = alice.Json("POST", "/v1/volumes", {{"name", "alicevol"}, {"size_mb", 16}});
    ASSERT_EQ(v.status, 201) << v.body;
    alice.Request("PUT", "/v1/volumes/alicevol/fs?path=/keep", "keep");
    auto s = alice.Json("POST", "/v1/sandboxes/" + alice_sb_ + "/snapshots", json::object());
    // The vm driver has no snapshots (501 not_supported, docs/api.md): the
    // snapshot checks are the jail's.
    if (!(hutch::testing::OnVm() && s.status == 501)) {
      ASSERT_EQ(s.status / 100, 2) << s.body;
      alice_snap_ = s.json()["id"];
    }
    auto b = As(kBob).Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
    ASSERT_EQ(b.status, 201) << b.body;
    bob_sb_ = b.json()["id"];
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    unlink(keys_file_.c_str());
  }

  static HttpClient As(const std::string& key) {
    return HttpClient("127.0.0.1", server_->port(), key);
  }
  static std::string Code(const Response& r) {
    return r.json().is_object() ? r.json().value("code", "") : "";
  }
  // Alice's sandbox is untouched: running, no /tmp/pwned, its file there.
  static void ExpectAliceUntouched() {
    auto c = As(kAdmin);
    auto st = c.Request("GET", "/v1/sandboxes/" + alice_sb_);
    EXPECT_EQ(st.json().value("status", ""), "running") << st.body;
    auto e = c.Json("POST", "/v1/sandboxes/" + alice_sb_ + "/exec",
                    {{"cmd", "ls /tmp/pwned 2>/dev/null; test -s /etc/hostname && echo ok"}});
    EXPECT_EQ(e.json().value("stdout", ""), "ok\n") << e.body;
    EXPECT_EQ(c.Request("GET", "/v1/volumes/alicevol/fs?path=/keep").body, "keep");
    if (!alice_snap_.empty()) {
      EXPECT_EQ(c.Request("GET", "/v1/snapshots/" + alice_snap_).status, 200);
    }
  }

  static inline TestServer* server_ = nullptr;
  static inline std::string keys_file_, alice_sb_, alice_snap_, bob_sb_;
};

// Bob's key on every /v1 route naming Alice's sandbox or volume gets what
// the same route gets for a name that does not exist: 404, same code.
TEST_F(Tenants, AnotherTenantsSandboxIsNotFoundOnEveryV1Route) {
  int not_found = 0;
  for (const auto& r : hutch::testing::V1Routes()) {
    if (r.path.find('{') == std::string::npos) continue;
    HttpClient bob = As(kBob);
    std::map<std::string, std::string> h;
    if (!r.body.empty())
      h["Content-Type"] = r.body == "x" ? "application/octet-stream" : "application/json";
    auto theirs = bob.Request(r.method, Fill(r.path, true, alice_sb_, "alicevol"), r.body, h);
    auto none = bob.Request(r.method, Fill(r.path, false, alice_sb_, "alicevol"), r.body, h);
    // (A route that is no route, like POST .../network, answers its 405
    // for both alike.)
    EXPECT_GE(theirs.status, 400) << r.method << " " << r.path << ": " << theirs.body;
    EXPECT_EQ(theirs.status, none.status) << r.method << " " << r.path;
    EXPECT_EQ(Code(theirs), Code(none)) << r.method << " " << r.path << ": " << theirs.body;
    not_found += theirs.status == 404;
  }
  EXPECT_GE(not_found, 30);
  // The other key of the same tenant reaches it (rotation keeps ownership).
  EXPECT_EQ(As(kAlice2).Request("GET", "/v1/sandboxes/" + alice_sb_).status, 200);
  EXPECT_EQ(As(kAlice2).Request("GET", "/v1/volumes/alicevol").status, 200);
  ExpectAliceUntouched();
}

TEST_F(Tenants, AnotherTenantsSandboxIsNotFoundThroughE2bAndOpenSandbox) {
  int not_found = 0;
  for (const auto& r : hutch::testing::E2bControlRoutes()) {
    if (r.path.find("{id}") == std::string::npos) continue;
    HttpClient c("127.0.0.1", server_->port());
    std::map<std::string, std::string> h = {{"X-API-Key", kBob}};
    if (!r.body.empty()) h["Content-Type"] = "application/json";
    auto theirs = c.Request(r.method, Fill(r.path, true, alice_sb_), r.body, h);
    auto none = c.Request(r.method, Fill(r.path, false, alice_sb_), r.body, h);
    // (The operations E2B's layer does not offer answer 501 for both.)
    EXPECT_GE(theirs.status, 400) << r.method << " " << r.path << ": " << theirs.body;
    EXPECT_EQ(theirs.status, none.status) << r.method << " " << r.path;
    not_found += theirs.status == 404;
  }
  EXPECT_GE(not_found, 7);
  for (const auto& r : hutch::testing::OpenSandboxSandboxRoutes()) {
    HttpClient c("127.0.0.1", server_->port());
    std::map<std::string, std::string> h = {{"OPEN-SANDBOX-API-KEY", kBob}};
    if (!r.body.empty()) h["Content-Type"] = "application/json";
    auto theirs = c.Request(r.method, Fill(r.path, true, alice_sb_), r.body, h);
    auto none = c.Request(r.method, Fill(r.path, false, alice_sb_), r.body, h);
    EXPECT_EQ(theirs.status, 404) << r.method << " " << r.path << ": " << theirs.body;
    EXPECT_EQ(theirs.status, none.status) << r.method << " " << r.path;
  }
  // execd through the server proxy with Bob's key instead of the token.
  HttpClient c("127.0.0.1", server_->port());
  auto proxied = c.Request("GET", "/opensandbox/sandboxes/" + alice_sb_ + "/proxy/44772/ping", "",
                           {{"OPEN-SANDBOX-API-KEY", kBob}});
  EXPECT_EQ(proxied.status, 404) << proxied.body;
  ExpectAliceUntouched();
}

TEST_F(Tenants, AnotherTenantsSandboxIsNotFoundThroughThePortProxy) {
  // A server inside Alice's sandbox that Bob must not reach.
  auto c = As(kAlice1);
  auto p = c.Json("POST", "/v1/sandboxes/" + alice_sb_ + "/processes",
                  {{"cmd", "python3 -m http.server 8000 --bind 127.0.0.1"}});
  ASSERT_EQ(p.status / 100, 2) << p.body;
  // Alice reaches it (once it listens): the control.
  int alice_status = 0;
  for (int i = 0; i < 100 && alice_status != 200; ++i) {
    alice_status = c.Request("GET", "/v1/sandboxes/" + alice_sb_ + "/ports/8000/").status;
    if (hutch::testing::OnVm() && alice_status == 501)
      break;  // vm: no exposed ports; Bob's 404s still hold
    if (alice_status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!(hutch::testing::OnVm() && alice_status == 501)) {
    ASSERT_EQ(alice_status, 200);
  }
  auto bob = As(kBob);
  auto v1 = bob.Request("GET", "/v1/sandboxes/" + alice_sb_ + "/ports/8000/");
  EXPECT_EQ(v1.status, 404) << v1.body;
  EXPECT_EQ(Code(v1), "sandbox_not_found") << v1.body;
  HttpClient anon("127.0.0.1", server_->port());
  auto header_form = anon.Request(
      "GET", "/e2b/", "",
      {{"E2b-Sandbox-Id", alice_sb_}, {"E2b-Sandbox-Port", "8000"}, {"X-API-Key", kBob}});
  EXPECT_EQ(header_form.status, 404) << header_form.body;
  auto host_form = anon.Request(
      "GET", "/", "", {{"Host", "8000-" + alice_sb_ + ".hutch.test"}, {"X-API-Key", kBob}});
  EXPECT_EQ(host_form.status, 404) << host_form.body;
  auto bearer_form = anon.Request(
      "GET", "/", "",
      {{"Host", "8000-" + alice_sb_ + ".hutch.test"}, {"Authorization", "Bearer " + kBob}});
  EXPECT_EQ(bearer_form.status, 404) << bearer_form.body;
  // Alice's own key through the same forms: the control.
  auto alice_host = anon.Request(
      "GET", "/", "", {{"Host", "8000-" + alice_sb_ + ".hutch.test"}, {"X-API-Key", kAlice2}});
  // (vm without a network: the same 501 as for /v1 above, past the check)
  EXPECT_EQ(alice_host.status, hutch::testing::OnVm() && alice_status == 501 ? 501 : 200)
      << alice_host.body;
}

TEST_F(Tenants, ListsShowOnlyTheTenantsOwnAndTheAdminSeesAll) {
  auto ids = [](const json& items) {
    std::vector<std::string> out;
    for (const auto& i : items) out.push_back(i.value("id", i.value("sandboxID", "")));
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  auto bob_v1 = ids(As(kBob).Request("GET", "/v1/sandboxes").json()["items"]);
  EXPECT_TRUE(has(bob_v1, bob_sb_));
  EXPECT_FALSE(has(bob_v1, alice_sb_));
  auto alice_v1 = ids(As(kAlice2).Request("GET", "/v1/sandboxes").json()["items"]);
  EXPECT_TRUE(has(alice_v1, alice_sb_));
  EXPECT_FALSE(has(alice_v1, bob_sb_));
  auto admin_v1 = ids(As(kAdmin).Request("GET", "/v1/sandboxes").json()["items"]);
  EXPECT_TRUE(has(admin_v1, alice_sb_));
  EXPECT_TRUE(has(admin_v1, bob_sb_));

  HttpClient c("127.0.0.1", server_->port());
  auto e2b = c.Request("GET", "/e2b/sandboxes", "", {{"X-API-Key", kBob}});
  ASSERT_EQ(e2b.status, 200) << e2b.body;
  EXPECT_EQ(e2b.body.find(alice_sb_), std::string::npos);
  EXPECT_NE(e2b.body.find(bob_sb_), std::string::npos);
  auto osb = c.Request("GET", "/opensandbox/v1/sandboxes", "", {{"OPEN-SANDBOX-API-KEY", kBob}});
  ASSERT_EQ(osb.status, 200) << osb.body;
  EXPECT_EQ(osb.body.find(alice_sb_), std::string::npos);
  EXPECT_NE(osb.body.find(bob_sb_), std::string::npos);

  if (!alice_snap_.empty()) {
    auto snaps = As(kBob).Request("GET", "/v1/snapshots");
    EXPECT_EQ(snaps.body.find(alice_snap_), std::string::npos) << snaps.body;
    EXPECT_NE(As(kAlice2).Request("GET", "/v1/snapshots").body.find(alice_snap_),
              std::string::npos);
    auto osb_snaps =
        c.Request("GET", "/opensandbox/v1/snapshots", "", {{"OPEN-SANDBOX-API-KEY", kBob}});
    EXPECT_EQ(osb_snaps.body.find(alice_snap_), std::string::npos) << osb_snaps.body;
  }
  auto vols = As(kBob).Request("GET", "/v1/volumes");
  EXPECT_EQ(vols.body.find("alicevol"), std::string::npos) << vols.body;
  EXPECT_NE(As(kAdmin).Request("GET", "/v1/volumes").body.find("alicevol"), std::string::npos);
}

// Creating on what belongs to another tenant: its snapshot, its volume.
TEST_F(Tenants, AnotherTenantsSnapshotAndVolumeCannotBeUsed) {
  auto bob = As(kBob);
  if (!alice_snap_.empty()) {
    auto from_snap = bob.Json("POST", "/v1/sandboxes", {{"snapshot", alice_snap_}});
    EXPECT_EQ(from_snap.status, 404) << from_snap.body;
    EXPECT_EQ(Code(from_snap), "snapshot_not_found");
  }
  auto with_vol =
      bob.Json("POST", "/v1/sandboxes",
               {{"volumes", json::array({{{"name", "alicevol"}, {"path", "/mnt/v"}}})}});
  EXPECT_EQ(with_vol.status, 404) << with_vol.body;
  EXPECT_EQ(Code(with_vol), "volume_not_found");
  // Alice (her other key) can.
  auto alice = As(kAlice2);
  auto own = alice.Json("POST", "/v1/sandboxes",
                        {{"volumes", json::array({{{"name", "alicevol"}, {"path", "/mnt/v"}}})}});
  // (vm sandboxes take no volumes: 501 not_supported, docs/api.md)
  if (hutch::testing::OnVm() && own.status == 501) {
    EXPECT_EQ(Code(own), "not_supported") << own.body;
  } else {
    EXPECT_EQ(own.status, 201) << own.body;
  }
  if (own.status == 201)
    alice.Request("DELETE", "/v1/sandboxes/" + own.json()["id"].get<std::string>());
  ExpectAliceUntouched();
}

// Shared settings are the admin's: a tenant may not move aliases or remove
// a template every key uses.
TEST_F(Tenants, TenantKeysCannotChangeSharedTemplates) {
  auto bob = As(kBob);
  auto alias = bob.Request("PUT", "/v1/template-aliases/python", R"({"template":"base"})",
                           {{"Content-Type", "application/json"}});
  EXPECT_EQ(alias.status, 403) << alias.body;
  EXPECT_EQ(Code(alias), "forbidden");
  auto del = bob.Request("DELETE", "/v1/templates/base");
  EXPECT_EQ(del.status, 403) << del.body;
  EXPECT_EQ(bob.Request("GET", "/v1/template-aliases").status, 200);
  EXPECT_EQ(bob.Request("GET", "/v1/templates/base").status, 200);
  // Building over a shared name would change it for everyone.
  auto build = bob.Request("POST", "/v1/templates", R"({"name":"python","from":"base"})",
                           {{"Content-Type", "application/json"}});
  EXPECT_EQ(build.status, 409) << build.body;
}

// The tokens: E2B's envd token opens Alice's sandbox and nothing else; it
// is not derivable from state.db (the secret lives in its own 0600 file).
TEST_F(Tenants, SandboxTokensUseTheServerSecretKeptOutsideTheDatabase) {
  HttpClient c("127.0.0.1", server_->port());
  auto got = c.Request("GET", "/e2b/sandboxes/" + alice_sb_, "", {{"X-API-Key", kAlice1}});
  ASSERT_EQ(got.status, 200) << got.body;
  const std::string token = got.json().value("envdAccessToken", "");
  ASSERT_EQ(token.size(), 64u);
  auto stat_call = c.Request("GET", "/e2b/files?path=/etc/hostname", "",
                             {{"E2b-Sandbox-Id", alice_sb_}, {"X-Access-Token", token}});
  EXPECT_EQ(stat_call.status, 200) << stat_call.body;
  auto on_bob = c.Request("GET", "/e2b/files?path=/etc/hostname", "",
                          {{"E2b-Sandbox-Id", bob_sb_}, {"X-Access-Token", token}});
  EXPECT_EQ(on_bob.status, 401) << on_bob.body;

  const std::string secret_path = server_->state_dir() + "/state/server.secret";
  struct stat st {};
  ASSERT_EQ(stat(secret_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(secret_path);
  std::string secret;
  in >> secret;
  ASSERT_GE(secret.size(), 32u);
  std::ifstream db(server_->state_dir() + "/state/state.db", std::ios::binary);
  std::stringstream bytes;
  bytes << db.rdbuf();
  EXPECT_EQ(bytes.str().find(secret), std::string::npos);
  // The token is not the pre-secret derivation (SHA-256 of label, owner
  // and id, which anyone with state.db could compute).
  EXPECT_NE(token, hutch::Sha256Hex("hutch-e2b-envd-access-token\nt:alice\n" + alice_sb_));
}

// Rotation without a restart: drop Alice's first key from the file, SIGHUP;
// that key stops at once, her other key keeps her sandbox.
TEST_F(Tenants, KeyRotationTakesEffectOnSighupAndKeepsOwnership) {
  ASSERT_EQ(As(kAlice1).Request("GET", "/v1/sandboxes/" + alice_sb_).status, 200);
  WriteKeysFile(false);
  ASSERT_EQ(kill(server_->pid(), SIGHUP), 0);
  int status = 200;
  for (int i = 0; i < 50 && status != 401; ++i) {
    status = As(kAlice1).Request("GET", "/v1/sandboxes/" + alice_sb_).status;
    if (status != 401) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 401);
  EXPECT_EQ(As(kAlice2).Request("GET", "/v1/sandboxes/" + alice_sb_).status, 200);
  EXPECT_EQ(As(kBob).Request("GET", "/v1/sandboxes/" + alice_sb_).status, 404);
  WriteKeysFile(true);
  kill(server_->pid(), SIGHUP);
}

}  // namespace
