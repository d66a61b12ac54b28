// GET /v1/sandboxes/{id}/events and E2B's logs routes against the real
// hutchd: a sandbox's life (create, commands, a background process, pause,
// resume, TTL, kill) shows up in its event log in order; paging, the level
// filter and bad queries; the follow stream gets a new event and ends with
// the sandbox; another tenant's sandbox and an unknown one are 404; the
// log keeps only --sandbox-events entries, and survives a crash of hutchd
// with its sandbox.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "tests/support/test_server.h"

using hutch::client::HttpClient;
using hutch::client::SseEvent;
using hutch::testing::TestServer;
using hutch::testing::WaitFor;
using nlohmann::json;

namespace {

const std::string kAdmin = "hk_events_admin_0123456789";
const std::string kAlice = "hk_events_alice_0123456789";
const std::string kBob = "hk_events_bob_0123456789";

std::string KeysFile() {
  static const std::string path = hutch::testing::WriteTempFile(
      "hutch-events-keys", kAdmin + "\n" + kAlice + " tenant=alice\n" + kBob + " tenant=bob\n");
  return path;
}

// The `type`s of a page's items, in order.
std::vector<std::string> Types(const json& items) {
  std::vector<std::string> out;
  for (const auto& e : items) out.push_back(e.value("type", ""));
  return out;
}

// The first item of `type` whose fields match `fields` (null: none).
json Find(const json& items, const std::string& type, const json& fields = json::object()) {
  for (const auto& e : items) {
    if (e.value("type", "") != type) continue;
    bool match = true;
    for (const auto& [k, v] : fields.items()) match &= e["fields"].value(k, json()) == v;
    if (match) return e;
  }
  return nullptr;
}

class Events : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer({"--keys-file", KeysFile()}, /*with_env_key=*/false);
    ASSERT_TRUE(server_->ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    unlink(KeysFile().c_str());
  }
  static HttpClient As(const std::string& key) {
    return HttpClient("127.0.0.1", server_->port(), key);
  }
  static std::string Create(const std::string& key) {
    auto r = As(key).Json("POST", "/v1/sandboxes", {{"ttl_seconds", 600}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json().value("id", "");
  }
  // All of the sandbox's events (one page of up to 1000).
  static json All(const std::string& id, const std::string& query = "") {
    auto r = As(kAdmin).Request("GET", "/v1/sandboxes/" + id + "/events?limit=1000" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["items"];
  }
  static TestServer* server_;
};

TestServer* Events::server_ = nullptr;

TEST_F(Events, ASandboxLifeIsLoggedInOrder) {
  auto c = As(kAdmin);
  const std::string id = Create(kAdmin);
  const std::string base = "/v1/sandboxes/" + id;
  auto ok = c.Json("POST", base + "/exec", {{"cmd", "true"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  auto bad = c.Json("POST", base + "/exec", {{"cmd", "exit 3"}});
  ASSERT_EQ(bad.status, 200) << bad.body;
  auto bg = c.Json("POST", base + "/processes", {{"cmd", "sleep 0.2; exit 5"}});
  ASSERT_EQ(bg.status, 201) << bg.body;
  const int bg_pid = bg.json().value("pid", 0);
  // Nobody follows the background process: hutchd finds its exit itself.
  ASSERT_TRUE(WaitFor(
      [&] {
        return !Find(All(id), "process_exited", {{"pid", bg_pid}}).is_null();
      },
      std::chrono::seconds(30)))
      << All(id).dump();
  ASSERT_EQ(c.Request("POST", base + "/pause").status, 200);
  ASSERT_EQ(c.Request("POST", base + "/resume").status, 200);
  ASSERT_EQ(c.Json("POST", base + "/ttl", {{"ttl_seconds", 900}}).status, 200);
  ASSERT_EQ(c.Request("DELETE", base).status, 204);

  // A deleted sandbox's log stays readable with its record.
  const json items = All(id);
  const std::vector<std::string> want = {"created",         "started",         "process_started",
                                         "process_exited",  "process_started", "process_exited",
                                         "process_started", "process_exited",  "paused",
                                         "resumed",         "ttl_changed",     "stopped"};
  EXPECT_EQ(Types(items), want) << items.dump(1);
  int64_t seq = 0;
  for (const auto& e : items) {
    EXPECT_EQ(e["seq"], seq + 1) << e.dump();
    seq = e["seq"];
    EXPECT_TRUE(e["time"].is_string() && !e["time"].get<std::string>().empty()) << e.dump();
    EXPECT_FALSE(e.value("message", "").empty()) << e.dump();
  }
  const json created = Find(items, "created");
  EXPECT_EQ(created["fields"]["template"], "base") << created.dump();
  EXPECT_EQ(created["fields"]["driver"], hutch::testing::TestDriver()) << created.dump();
  EXPECT_TRUE(created["fields"].contains("memory_mb")) << created.dump();
  const json clean = Find(items, "process_exited", {{"command", "/bin/sh -c true"}});
  EXPECT_EQ(clean["level"], "info") << items.dump(1);
  EXPECT_EQ(clean["fields"]["exit_code"], 0);
  EXPECT_EQ(clean["fields"]["background"], false);
  const json failed = Find(items, "process_exited", {{"command", "/bin/sh -c exit 3"}});
  EXPECT_EQ(failed["level"], "warn") << items.dump(1);
  EXPECT_EQ(failed["fields"]["exit_code"], 3);
  const json background = Find(items, "process_exited", {{"pid", bg_pid}});
  EXPECT_EQ(background["fields"]["exit_code"], 5) << background.dump();
  EXPECT_EQ(background["fields"]["background"], true);
  EXPECT_EQ(background["fields"]["command"], "sleep 0.2; exit 5");
  EXPECT_EQ(Find(items, "process_started", {{"pid", bg_pid}})["level"], "info");
  EXPECT_EQ(Find(items, "process_started", {{"background", false}})["level"], "debug");
  EXPECT_EQ(Find(items, "ttl_changed")["fields"]["ttl_seconds"], 900);
  EXPECT_EQ(Find(items, "stopped")["fields"]["reason"], "deleted");
}

TEST_F(Events, PagesAndTheLevelFilter) {
  auto c = As(kAdmin);
  const std::string id = Create(kAdmin);
  for (const char* cmd : {"true", "exit 1", "true"})
    ASSERT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", cmd}}).status, 200);
  const json all = All(id);
  ASSERT_EQ(all.size(), 8u) << all.dump(1);  // created, started, 3 x (started, exited)

  // Pages of 3 from the start, each going on after the last one's seq.
  json seen = json::array();
  std::string after = "0";
  for (int page = 0; page < 5; ++page) {
    auto r = c.Request("GET", "/v1/sandboxes/" + id + "/events?limit=3&after=" + after);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    ASSERT_LE(j["items"].size(), 3u);
    for (const auto& e : j["items"]) seen.push_back(e);
    if (j["next_after"].is_null()) break;
    EXPECT_EQ(j["next_after"], j["items"].back()["seq"]);
    after = std::to_string(j["next_after"].get<int64_t>());
  }
  EXPECT_EQ(seen, all);

  const json warn = All(id, "&level=warn");
  ASSERT_EQ(warn.size(), 1u) << warn.dump(1);
  EXPECT_EQ(warn[0]["fields"]["command"], "/bin/sh -c exit 1");
  const json info = All(id, "&level=info");
  for (const auto& e : info) EXPECT_NE(e["level"], "debug") << e.dump();
  EXPECT_EQ(info.size(), 5u) << info.dump(1);  // debug: the three starts

  for (const char* q :
       {"?level=loud", "?limit=0", "?limit=1001", "?after=-1", "?follow=maybe", "?colour=red"}) {
    auto r = c.Request("GET", "/v1/sandboxes/" + id + "/events" + std::string(q));
    EXPECT_EQ(r.status, 400) << q << ": " << r.body;
    EXPECT_EQ(r.json()["code"], "invalid_request") << q << ": " << r.body;
  }
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(Events, FollowGetsNewEventsAndEndsWithTheSandbox) {
  const std::string id = Create(kAlice);
  std::mutex mu;
  std::vector<std::pair<std::string, json>> got;
  std::vector<std::string> ids;
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto follower = As(kAlice);
    auto r = follower.SseRequest("GET", "/v1/sandboxes/" + id + "/events?follow=true&level=info",
                                 "", {}, [&](const SseEvent& ev) {
                                   std::lock_guard<std::mutex> l(mu);
                                   got.emplace_back(ev.event, json::parse(ev.data, nullptr, false));
                                   ids.push_back(ev.id);
                                   return true;
                                 });
    EXPECT_EQ(r.status, 200) << r.body;
    done = true;
  });
  auto has = [&](const std::string& type, const json& fields) {
    std::lock_guard<std::mutex> l(mu);
    json items = json::array();
    for (const auto& [name, j] : got)
      if (name == "event") items.push_back(j);
    return !Find(items, type, fields).is_null();
  };
  // The history first.
  ASSERT_TRUE(WaitFor([&] { return has("started", json::object()); }, std::chrono::seconds(10)));
  auto c = As(kAlice);
  ASSERT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "echo hi"}}).status, 200);
  EXPECT_TRUE(WaitFor(
      [&] {
        return has("process_exited", {{"command", "/bin/sh -c echo hi"}});
      },
      std::chrono::seconds(10)));
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  // The stream ends by itself once the sandbox stopped.
  EXPECT_TRUE(WaitFor([&] { return done.load(); }, std::chrono::seconds(10)));
  t.join();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(got.back().first, "end");
  EXPECT_EQ(got[got.size() - 2].second["type"], "stopped");
  for (size_t i = 0; i + 1 < got.size(); ++i) {
    EXPECT_EQ(got[i].first, "event");
    EXPECT_NE(got[i].second["level"], "debug") << got[i].second.dump();
    // The SSE id is the seq, for Last-Event-ID.
    EXPECT_EQ(ids[i], std::to_string(got[i].second["seq"].get<int64_t>()));
  }
}

TEST_F(Events, FollowResumesAfterLastEventId) {
  const std::string id = Create(kAdmin);
  std::vector<json> got;
  auto r = As(kAdmin).SseRequest("GET", "/v1/sandboxes/" + id + "/events?follow=true", "",
                                 {{"Last-Event-ID", "1"}}, [&](const SseEvent& ev) {
                                   got.push_back(json::parse(ev.data, nullptr, false));
                                   return false;  // the first one is enough
                                 });
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["seq"], 2) << got[0].dump();
  EXPECT_EQ(got[0]["type"], "started");
  ASSERT_EQ(As(kAdmin).Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(Events, UnknownAndOtherTenantsSandboxesAreNotFound) {
  const std::string id = Create(kAlice);
  auto mine = As(kAlice).Request("GET", "/v1/sandboxes/" + id + "/events");
  EXPECT_EQ(mine.status, 200) << mine.body;
  for (const std::string& q : {std::string(""), std::string("?follow=true")}) {
    auto theirs = As(kBob).Request("GET", "/v1/sandboxes/" + id + "/events" + q);
    EXPECT_EQ(theirs.status, 404) << theirs.body;
    EXPECT_EQ(theirs.json()["code"], "sandbox_not_found") << theirs.body;
  }
  auto e2b =
      As(kBob).Request("GET", "/e2b/v2/sandboxes/" + id + "/logs", "", {{"X-API-Key", kBob}});
  EXPECT_EQ(e2b.status, 404) << e2b.body;
  auto none = As(kAdmin).Request("GET", "/v1/sandboxes/sb_0000000000000000/events");
  EXPECT_EQ(none.status, 404) << none.body;
  EXPECT_EQ(none.json()["code"], "sandbox_not_found") << none.body;
  ASSERT_EQ(As(kAlice).Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(Events, E2bLogsServeTheSameLog) {
  auto c = As(kAdmin);
  const std::string id = Create(kAdmin);
  ASSERT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "exit 2"}}).status, 200);
  const std::map<std::string, std::string> key = {{"X-API-Key", kAdmin}};
  HttpClient anon("127.0.0.1", server_->port());

  auto v1 = anon.Request("GET", "/e2b/sandboxes/" + id + "/logs", "", key);
  ASSERT_EQ(v1.status, 200) << v1.body;
  const json j = v1.json();
  ASSERT_TRUE(j["logs"].is_array() && j["logEntries"].is_array()) << v1.body;
  ASSERT_EQ(j["logs"].size(), All(id).size()) << v1.body;
  ASSERT_EQ(j["logs"].size(), j["logEntries"].size());
  EXPECT_TRUE(j["logs"][0]["timestamp"].is_string());
  EXPECT_NE(j["logs"][0]["line"].get<std::string>().find("created"), std::string::npos) << v1.body;
  const json& first = j["logEntries"][0];
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["fields"]["type"], "created");
  EXPECT_EQ(first["fields"]["template"], "base");
  // E2B's fields are strings.
  for (const auto& e : j["logEntries"])
    for (const auto& [k, v] : e["fields"].items()) EXPECT_TRUE(v.is_string()) << k << e.dump();

  auto limited = anon.Request("GET", "/e2b/sandboxes/" + id + "/logs?limit=1", "", key);
  EXPECT_EQ(limited.json()["logEntries"].size(), 1u) << limited.body;
  // `start` is unix ms: past the last event, nothing.
  const int64_t later = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() +
                        60000;
  auto none =
      anon.Request("GET", "/e2b/sandboxes/" + id + "/logs?start=" + std::to_string(later), "", key);
  EXPECT_EQ(none.json()["logs"].size(), 0u) << none.body;

  auto v2 = anon.Request("GET", "/e2b/v2/sandboxes/" + id + "/logs?level=warn", "", key);
  ASSERT_EQ(v2.status, 200) << v2.body;
  ASSERT_EQ(v2.json()["logs"].size(), 1u) << v2.body;
  EXPECT_EQ(v2.json()["logs"][0]["level"], "warn");
  EXPECT_EQ(v2.json()["logs"][0]["fields"]["exit_code"], "2");
  auto back =
      anon.Request("GET", "/e2b/v2/sandboxes/" + id + "/logs?direction=backward&limit=1", "", key);
  ASSERT_EQ(back.json()["logs"].size(), 1u) << back.body;
  EXPECT_EQ(back.json()["logs"][0]["fields"]["type"], "process_exited") << back.body;
  auto bad = anon.Request("GET", "/e2b/v2/sandboxes/" + id + "/logs?direction=sideways", "", key);
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto unknown = anon.Request("GET", "/e2b/sandboxes/sb_0000000000000000/logs", "", key);
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  // Still readable after the kill, as E2B keeps a killed sandbox's logs.
  auto after = anon.Request("GET", "/e2b/v2/sandboxes/" + id + "/logs", "", key);
  EXPECT_EQ(after.status, 200) << after.body;
}

// Its own server: a small cap, and a crash.
TEST(EventsCap, KeepsTheNewestAndSurvivesACrash) {
  TestServer s({"--sandbox-events", "5"});
  ASSERT_TRUE(s.ok()) << s.Log();
  const std::string id = s.CreateSandbox();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(s.Exec(id, "true")["_status"], 200);
  auto events = [&] {
    auto r = s.Client().Request("GET", "/v1/sandboxes/" + id + "/events");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["items"];
  };
  json before = events();
  // created, started and 4 x 2 exec events: 10 made, the newest 5 kept.
  ASSERT_EQ(before.size(), 5u) << before.dump(1);
  EXPECT_EQ(before[0]["seq"], 6);
  EXPECT_EQ(before[4]["seq"], 10);
  EXPECT_EQ(before[4]["type"], "process_exited");

  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok()) << s.Log();
  json after = events();
  ASSERT_EQ(after.size(), 5u) << after.dump(1);
  // Seqs go on from where they were; the adoption is logged.
  EXPECT_EQ(after[3], before[4]) << after.dump(1);
  EXPECT_EQ(after[4]["seq"], 11);
  EXPECT_EQ(after[4]["type"], "adopted");
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + id).status, 204);
}

}  // namespace
