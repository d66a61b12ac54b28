// /v1/sandboxes/{id}/vault against the real hutchd (issue 26): the
// credential and binding routes, reads that never answer a value, a
// malformed body not quoted back, the value absent from hutchd's log and
// from the state database's bytes, the vault gone with its sandbox, and
// kept across a restart that adopts the sandbox.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "support/test_server.h"

namespace hutch::testing {
namespace {

using nlohmann::json;

constexpr char kSecret[] = "sk-vault-test-5d1c9e7a3f";

json Binding() {
  return json::parse(R"({"match": {"host": "api.world.test", "paths": ["/v1/*"]},
                         "auth": {"type": "header", "credential": "api", "header": "x-api-key"}})");
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The state directory's database files, all of them.
std::string StateDbBytes(const TestServer& s) {
  return FileBytes(s.state_dir() + "/state/state.db") +
         FileBytes(s.state_dir() + "/state/state.db-wal");
}

TEST(ApiVault, CredentialsAndBindingsWithoutEverAnsweringAValue) {
  TestServer s({"--no-network"});
  ASSERT_TRUE(s.ok());
  const std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string base = "/v1/sandboxes/" + id + "/vault";

  auto r = c.Request("GET", base);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["credentials"], json::array());

  // A binding before its credential is refused.
  r = c.Json("PUT", base + "/bindings/world", Binding());
  EXPECT_EQ(r.status, 400) << r.body;
  r = c.Json("PUT", base + "/credentials/api", {{"value", kSecret}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find(kSecret), std::string::npos);
  r = c.Json("PUT", base + "/bindings/world", Binding());
  ASSERT_EQ(r.status, 200) << r.body;
  // (The database read is the right one: the binding is there as text.)
  EXPECT_NE(StateDbBytes(s).find("api.world.test"), std::string::npos);
  r = c.Request("GET", base);
  EXPECT_EQ(r.json()["credentials"], json::array({{{"name", "api"}}}));
  EXPECT_EQ(r.json()["bindings"][0]["auth"]["header"], "x-api-key");
  EXPECT_EQ(r.body.find(kSecret), std::string::npos);

  // A body that does not parse is not quoted back (it may be the secret).
  r = c.Request("PUT", base + "/credentials/api", std::string("{\"value\": \"") + kSecret);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.find(kSecret), std::string::npos) << r.body;
  // A host file is reachable only through a source the operator named.
  r = c.Json("PUT", base + "/credentials/f", {{"source", "file:/etc/shadow"}});
  EXPECT_EQ(r.status, 400);

  EXPECT_EQ(c.Request("DELETE", base + "/credentials/api").status, 409);
  EXPECT_EQ(c.Request("DELETE", base + "/bindings/world").status, 204);
  EXPECT_EQ(c.Request("DELETE", base + "/bindings/world").status, 404);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/sb_nope/vault").status, 404);

  EXPECT_EQ(StateDbBytes(s).find(kSecret), std::string::npos);
  EXPECT_EQ(s.Log().find(kSecret), std::string::npos);
}

TEST(ApiVault, ReplacedWholeKeptAcrossRestartAndGoneWithTheSandbox) {
  TestServer s({"--no-network"});
  ASSERT_TRUE(s.ok());
  const std::string id = s.CreateSandbox();
  auto c = s.Client();
  const std::string base = "/v1/sandboxes/" + id + "/vault";
  json b = Binding();
  b["name"] = "world";
  json whole{{"credentials", {{{"name", "api"}, {"value", kSecret}}}}, {"bindings", {b}}};
  auto r = c.Json("PUT", base, whole);
  ASSERT_EQ(r.status, 200) << r.body;

  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  r = c2.Request("GET", base);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["bindings"][0]["name"], "world");
  EXPECT_EQ(r.json()["credentials"][0]["name"], "api");

  // The key that seals it is its own 0600 file, not in the database.
  struct stat st {};
  ASSERT_EQ(stat((s.state_dir() + "/state/vault.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(StateDbBytes(s).find(kSecret), std::string::npos);

  ASSERT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(c2.Request("GET", base).status, 404);
  EXPECT_EQ(s.Log().find(kSecret), std::string::npos);
}

}  // namespace
}  // namespace hutch::testing
