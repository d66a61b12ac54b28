// Issue 32 #12: per-tenant quotas. A tenant key's owner id may hold only so
// many live sandboxes, snapshots, volumes (and their GB) and templates;
// past one, every dialect answers quota_exceeded (403) in its own error
// shape, deleting frees room, and another tenant and the admin key (the
// operator's, exempt) are unaffected.
//
// The server runs with a keys file (an admin key and tenant keys, one
// tenant per quota so the cases do not share counts) and small quotas.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_server.h"

using hutch::client::HttpClient;
using hutch::client::Response;
using hutch::testing::TestServer;
using nlohmann::json;

namespace {

const std::string kAdmin = "admin-key-0123456789";
const std::string kAlice = "alice-key-0123456789";  // sandboxes
const std::string kCarol = "carol-key-0123456789";  // snapshots
const std::string kDave = "dave-key-0123456789";    // volumes
const std::string kErin = "erin-key-0123456789";    // templates
const std::string kBob = "bob-key-0123456789";      // the other tenant
const std::string kGina = "gina-key-0123456789";    // concurrent creates
const std::string kHal = "hal-key-0123456789";      // a restart

class Quotas : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/hutch-quota-keys-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    keys_file_ = tmpl;
    std::ofstream(keys_file_) << kAdmin << "\n"
                              << kAlice << " tenant=alice\n"
                              << kCarol << " tenant=carol\n"
                              << kDave << " tenant=dave\n"
                              << kErin << " tenant=erin\n"
                              << kBob << " tenant=bob\n"
                              << kGina << " tenant=gina\n"
                              << kHal << " tenant=hal\n";
    server_ = new TestServer(
        {"--keys-file", keys_file_, "--tenant-max-sandboxes", "2", "--tenant-max-snapshots", "1",
         "--tenant-max-volumes", "2", "--tenant-max-volume-gb", "1", "--tenant-max-templates", "1"},
        /*with_env_key=*/false);
    ASSERT_TRUE(server_->ok()) << server_->Log();
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
  static std::string NewSandbox(const std::string& key) {
    auto r = As(key).Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json().value("id", "");
  }
  static void ExpectQuota(const Response& r, const std::string& flag) {
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(Code(r), "quota_exceeded") << r.body;
    EXPECT_NE(r.body.find(flag), std::string::npos) << r.body;
  }

  static TestServer* server_;
  static std::string keys_file_;
};

TestServer* Quotas::server_ = nullptr;
std::string Quotas::keys_file_;

TEST_F(Quotas, LiveSandboxesInEveryDialect) {
  std::vector<std::string> mine = {NewSandbox(kAlice), NewSandbox(kAlice)};
  HttpClient alice = As(kAlice);

  ExpectQuota(alice.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}}),
              "--tenant-max-sandboxes");
  // E2B: {"code": <http status>, "message": ...}.
  auto e2b = alice.Request("POST", "/e2b/sandboxes", R"({"templateID":"base"})",
                           {{"X-API-Key", kAlice}, {"Content-Type", "application/json"}});
  EXPECT_EQ(e2b.status, 403) << e2b.body;
  EXPECT_EQ(e2b.json().value("code", 0), 403) << e2b.body;
  EXPECT_NE(e2b.body.find("--tenant-max-sandboxes"), std::string::npos) << e2b.body;
  // OpenSandbox: {"code": "HUTCH::QUOTA_EXCEEDED", ...}.
  auto osb = alice.Request(
      "POST", "/opensandbox/v1/sandboxes", R"({"image":{"uri":"ubuntu:latest"},"timeout":600})",
      {{"OPEN-SANDBOX-API-KEY", kAlice}, {"Content-Type", "application/json"}});
  EXPECT_EQ(osb.status, 403) << osb.body;
  EXPECT_EQ(Code(osb), "HUTCH::QUOTA_EXCEEDED") << osb.body;
  // A fork's children count too.
  ExpectQuota(alice.Json("POST", "/v1/sandboxes/" + mine[0] + "/fork", {{"count", 1}}),
              "--tenant-max-sandboxes");

  // Another tenant and the admin are not held by alice's count.
  std::string bobs = NewSandbox(kBob);
  std::vector<std::string> admins = {NewSandbox(kAdmin), NewSandbox(kAdmin), NewSandbox(kAdmin)};

  // Deleting one frees room; the refused creates left nothing behind.
  EXPECT_EQ(alice.Request("DELETE", "/v1/sandboxes/" + mine[1]).status, 204);
  auto list = alice.Request("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200) << list.body;
  int running = 0;
  const json items = list.json()["items"];
  for (const auto& it : items) running += it.value("status", "") == "running";
  EXPECT_EQ(running, 1) << list.body;
  mine[1] = NewSandbox(kAlice);
  ExpectQuota(alice.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}}),
              "--tenant-max-sandboxes");

  HttpClient admin = As(kAdmin);
  for (const auto& id : mine) admin.Request("DELETE", "/v1/sandboxes/" + id);
  for (const auto& id : admins) admin.Request("DELETE", "/v1/sandboxes/" + id);
  admin.Request("DELETE", "/v1/sandboxes/" + bobs);
}

TEST_F(Quotas, Snapshots) {
  if (hutch::testing::OnVm()) GTEST_SKIP() << "the vm driver takes no file snapshots yet (501)";
  HttpClient carol = As(kCarol);
  std::string sb = NewSandbox(kCarol);
  auto first = carol.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object());
  ASSERT_EQ(first.status, 201) << first.body;
  ExpectQuota(carol.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object()),
              "--tenant-max-snapshots");
  auto osb =
      carol.Request("POST", "/opensandbox/v1/sandboxes/" + sb + "/snapshots", "{}",
                    {{"OPEN-SANDBOX-API-KEY", kCarol}, {"Content-Type", "application/json"}});
  EXPECT_EQ(osb.status, 403) << osb.body;
  EXPECT_EQ(Code(osb), "HUTCH::QUOTA_EXCEEDED") << osb.body;

  // The admin may snapshot carol's sandbox (exempt); bob his own.
  auto by_admin = As(kAdmin).Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object());
  EXPECT_EQ(by_admin.status, 201) << by_admin.body;
  std::string bobs = NewSandbox(kBob);
  auto by_bob = As(kBob).Json("POST", "/v1/sandboxes/" + bobs + "/snapshots", json::object());
  EXPECT_EQ(by_bob.status, 201) << by_bob.body;

  // A snapshot of carol's sandbox is carol's, whoever took it: deleting
  // her first one leaves the admin's counted; deleting that frees room.
  const std::string snap = first.json().value("id", "");
  EXPECT_EQ(carol.Request("DELETE", "/v1/snapshots/" + snap).status, 204);
  ExpectQuota(carol.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object()),
              "--tenant-max-snapshots");
  const std::string admins = by_admin.json().value("id", "");
  EXPECT_EQ(carol.Request("DELETE", "/v1/snapshots/" + admins).status, 204);
  auto again = carol.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object());
  EXPECT_EQ(again.status, 201) << again.body;

  HttpClient admin = As(kAdmin);
  admin.Request("DELETE", "/v1/sandboxes/" + sb);
  admin.Request("DELETE", "/v1/sandboxes/" + bobs);
}

TEST_F(Quotas, VolumesByCountAndSize) {
  HttpClient dave = As(kDave);
  auto a = dave.Json("POST", "/v1/volumes", {{"name", "dave-a"}, {"size_mb", 600}});
  ASSERT_EQ(a.status, 201) << a.body;
  // 600 + 600 MB is over 1 GB.
  ExpectQuota(dave.Json("POST", "/v1/volumes", {{"name", "dave-b"}, {"size_mb", 600}}),
              "--tenant-max-volume-gb");
  auto b = dave.Json("POST", "/v1/volumes", {{"name", "dave-b"}, {"size_mb", 300}});
  ASSERT_EQ(b.status, 201) << b.body;
  // Two volumes is the count.
  ExpectQuota(dave.Json("POST", "/v1/volumes", {{"name", "dave-c"}, {"size_mb", 16}}),
              "--tenant-max-volumes");

  // Another tenant and the admin are unaffected.
  auto bobs = As(kBob).Json("POST", "/v1/volumes", {{"name", "bob-a"}, {"size_mb", 600}});
  EXPECT_EQ(bobs.status, 201) << bobs.body;
  for (const char* n : {"admin-a", "admin-b", "admin-c"}) {
    auto r = As(kAdmin).Json("POST", "/v1/volumes", {{"name", n}, {"size_mb", 16}});
    EXPECT_EQ(r.status, 201) << r.body;
  }

  // Deleting one frees room.
  EXPECT_EQ(dave.Request("DELETE", "/v1/volumes/dave-a").status, 204);
  auto c = dave.Json("POST", "/v1/volumes", {{"name", "dave-c"}, {"size_mb", 16}});
  EXPECT_EQ(c.status, 201) << c.body;

  HttpClient admin = As(kAdmin);
  for (const char* n : {"dave-b", "dave-c", "bob-a", "admin-a", "admin-b", "admin-c"})
    admin.Request("DELETE", std::string("/v1/volumes/") + n);
}

TEST_F(Quotas, Templates) {
  HttpClient erin = As(kErin);
  auto spec = [](const std::string& name) {
    return "name = \"" + name +
           "\"\nfrom = \"base\"\n\n[[files]]\ndest = \"/etc/quota.conf\"\ncontent = \"" + name +
           "\\n\"\n";
  };
  const std::map<std::string, std::string> toml = {{"Content-Type", "application/toml"}};
  auto one = erin.Request("POST", "/v1/templates", spec("erin-one"), toml);
  ASSERT_EQ(one.status, 201) << one.body;
  ExpectQuota(erin.Request("POST", "/v1/templates", spec("erin-two"), toml),
              "--tenant-max-templates");
  // A rebuild of its own name replaces it: not one more.
  auto rebuild = erin.Request("POST", "/v1/templates", spec("erin-one"), toml);
  EXPECT_EQ(rebuild.status / 100, 2) << rebuild.body;

  // The admin is exempt.
  auto by_admin = As(kAdmin).Request("POST", "/v1/templates", spec("admin-two"), toml);
  EXPECT_EQ(by_admin.status / 100, 2) << by_admin.body;

  // Deleting it frees room.
  EXPECT_EQ(erin.Request("DELETE", "/v1/templates/erin-one").status / 100, 2);
  auto two = erin.Request("POST", "/v1/templates", spec("erin-two"), toml);
  EXPECT_EQ(two.status / 100, 2) << two.body;
}

// Creates at once from one tenant: the ones still starting count, so no
// more than the quota get through, however they interleave.
TEST_F(Quotas, ConcurrentCreatesCannotOvershoot) {
  constexpr int kCreates = 6;
  std::vector<Response> answers(kCreates);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCreates; ++i)
    threads.emplace_back([i, &answers] {
      answers[i] = As(kGina).Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
    });
  for (auto& t : threads) t.join();
  int created = 0, refused = 0;
  std::vector<std::string> ids;
  for (const auto& r : answers) {
    if (r.status == 201) {
      ++created;
      ids.push_back(r.json().value("id", ""));
    } else {
      ExpectQuota(r, "--tenant-max-sandboxes");
      ++refused;
    }
  }
  EXPECT_EQ(created, 2);
  EXPECT_EQ(refused, kCreates - 2);
  auto list = As(kGina).Request("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json()["items"].size(), 2u) << list.body;
  for (const auto& id : ids) As(kAdmin).Request("DELETE", "/v1/sandboxes/" + id);
}

// What a restarted hutchd counts comes from its state store (and the
// sandboxes it adopts). Last in the file: it restarts the suite's server.
TEST_F(Quotas, ARestartedServerCountsWhatItHolds) {
  HttpClient hal = As(kHal);
  std::string sb = NewSandbox(kHal);
  for (const char* n : {"hal-a", "hal-b"}) {
    auto r = hal.Json("POST", "/v1/volumes", {{"name", n}, {"size_mb", 16}});
    ASSERT_EQ(r.status, 201) << r.body;
  }
  // The vm driver takes no file snapshots yet (501).
  const bool snapshots = !hutch::testing::OnVm();
  Response snap;
  if (snapshots) {
    snap = hal.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object());
    ASSERT_EQ(snap.status, 201) << snap.body;
  }

  // A crash: the sandbox outlives hutchd and is adopted by the next one.
  server_->Kill9();
  server_->Restart();
  ASSERT_TRUE(server_->ok()) << server_->Log();
  HttpClient after = As(kHal);
  ASSERT_EQ(after.Request("GET", "/v1/sandboxes/" + sb).json().value("status", ""), "running");
  ExpectQuota(after.Json("POST", "/v1/volumes", {{"name", "hal-c"}, {"size_mb", 16}}),
              "--tenant-max-volumes");
  if (snapshots)
    ExpectQuota(after.Json("POST", "/v1/sandboxes/" + sb + "/snapshots", json::object()),
                "--tenant-max-snapshots");
  std::string second = NewSandbox(kHal);
  ExpectQuota(after.Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}}),
              "--tenant-max-sandboxes");

  HttpClient admin = As(kAdmin);
  admin.Request("DELETE", "/v1/sandboxes/" + second);
  admin.Request("DELETE", "/v1/sandboxes/" + sb);
  if (snapshots) admin.Request("DELETE", "/v1/snapshots/" + snap.json().value("id", ""));
  for (const char* n : {"hal-a", "hal-b"}) admin.Request("DELETE", std::string("/v1/volumes/") + n);
}
}  // namespace
