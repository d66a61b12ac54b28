// The path a new user walks with curl: create, exec, stream, upload,
// download, list, delete; and the documented JSON errors.
#include <unistd.h>

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

using namespace std::string_literals;

#include "tests/support/test_server.h"

using hutch::testing::HostSh;
using hutch::testing::TestServer;

TEST(ApiSmoke, CreateExecUploadDownloadDelete) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(id.rfind("sb_", 0), 0u);

  auto r = s.Exec(id, "echo hi; echo oops >&2; exit 3");
  EXPECT_EQ(r["_status"], 200);
  EXPECT_EQ(r["stdout"], "hi\n");
  EXPECT_EQ(r["stderr"], "oops\n");
  EXPECT_EQ(r["exit_code"], 3);
  EXPECT_EQ(r["timed_out"], false);

  auto c = s.Client();
  std::string data = "hello\0world"s;
  auto up = c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/home/user/a.bin", data,
                      {{"Content-Type", "application/octet-stream"}});
  EXPECT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(up.json()["size"], data.size());
  auto down = c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/home/user/a.bin");
  EXPECT_EQ(down.status, 200);
  EXPECT_EQ(down.body, data);

  auto list = c.Request("GET", "/v1/sandboxes");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json()["items"].size(), 1u);

  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);  // idempotent
  auto gone = c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}});
  EXPECT_EQ(gone.status, 409);
  EXPECT_EQ(gone.json()["code"], "sandbox_not_running");
}

TEST(ApiSmoke, DocumentedErrors) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  c.set_api_key("wrong");
  auto r = c.Request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.json()["code"], "unauthorized");
  EXPECT_FALSE(r.header("x-request-id").empty());
  c.set_api_key(s.key());
  r = c.Request("POST", "/v1/sandboxes", "{bad json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["code"], "invalid_request");
  r = c.Request("GET", "/v1/sandboxes/sb_doesnotexist");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["code"], "sandbox_not_found");
  EXPECT_EQ(r.json()["retryable"], false);
  r = c.Request("DELETE", "/v1/sandboxes/sb_doesnotexist");
  EXPECT_EQ(r.status, 404);
  r = c.Request("GET", "/nowhere");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["code"], "not_found");
  r = c.Request("PATCH", "/v1/sandboxes");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.json()["code"], "method_not_allowed");
  r = c.Request("GET", "/v1/sandboxes", "", {{"X-Request-Id", "my-req-1"}});
  EXPECT_EQ(r.header("x-request-id"), "my-req-1");
  r = c.Request("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  // Capabilities are reported as probed, never assumed: no memory
  // snapshots, and what `criu check` said on this host.
  auto caps = r.json()["capabilities"];
  EXPECT_EQ(caps["driver"], "jail");
  EXPECT_EQ(caps["memory_snapshots"], false);
  const std::string criu = caps.value("criu", "");
  bool installed = access("/usr/sbin/criu", X_OK) == 0;
  if (installed)
    EXPECT_TRUE(criu.rfind("check failed", 0) == 0 || criu.rfind("check passed", 0) == 0) << criu;
  else EXPECT_EQ(criu, "not installed");
}

TEST(ApiSmoke, GeneratesAKeyPrintsItOnceAndStoresOnlyItsHash) {
  TestServer s({}, /*with_env_key=*/false);
  ASSERT_TRUE(s.ok());
  const std::string key = s.key();
  ASSERT_EQ(key.rfind("hk_", 0), 0u) << key;
  // Printed once, on the first start.
  EXPECT_NE(s.Log().find(key), std::string::npos);
  auto c = s.Client();
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").status, 200);
  std::string id = s.CreateSandbox();
  c.set_api_key("test-key-0123456789");
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").status, 401);
  // Nothing in the state dir holds the key itself (the store, the records
  // of the sandbox it created, anything else).
  EXPECT_EQ(HostSh("grep -rl '" + key + "' " + s.state_dir() + "/state 2>/dev/null"), "");

  // A restart keeps accepting it, and does not print it again.
  size_t log_before = s.Log().size();
  s.Stop();
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.Log().find(key, log_before), std::string::npos);
  auto c2 = s.Client();
  c2.set_api_key(key);
  EXPECT_EQ(c2.Request("GET", "/v1/sandboxes").status, 200);

  // --new-key adds one (printed on stdout) that a SIGHUP makes live.
  std::string added = HostSh(std::string(getenv("HUTCHD_BIN")) + " --state-dir " + s.state_dir() +
                             "/state --new-key");
  while (!added.empty() && added.back() == '\n') added.pop_back();
  ASSERT_EQ(added.rfind("hk_", 0), 0u) << added;
  c2.set_api_key(added);
  EXPECT_EQ(c2.Request("GET", "/v1/sandboxes").status, 401);
  kill(s.pid(), SIGHUP);
  int status = 0;
  for (int i = 0; i < 100 && (status = c2.Request("GET", "/v1/sandboxes").status) != 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(status, 200);
  c2.set_api_key(key);
  EXPECT_EQ(c2.Request("GET", "/v1/sandboxes").status, 200);
}

TEST(ApiSmoke, CapacityCapsAnswer503AndCreateNothing) {
  TestServer s({"--max-sandboxes", "2", "--max-memory-committed-mb", "1024"});
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto a = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 512}});
  ASSERT_EQ(a.status, 201) << a.body;
  // Memory: 512 committed + 768 > 1024.
  auto r = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 768}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.json()["code"], "capacity_exhausted");
  EXPECT_EQ(r.json()["retryable"], true);
  EXPECT_FALSE(r.header("retry-after").empty());
  auto b = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 256}});
  ASSERT_EQ(b.status, 201) << b.body;
  // Count: two running is the limit.
  r = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 64}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.json()["code"], "capacity_exhausted");
  // Nothing half-created: two listed, two sandbox dirs.
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), 2u);
  EXPECT_EQ(HostSh("ls " + s.state_dir() + "/state/sandboxes | wc -l"), "2\n");
  // Room again after a delete.
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + a.json()["id"].get<std::string>()).status, 204);
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes", {{"memory_mb", 512}}).status, 201);
}

TEST(ApiSmoke, ListFiltersAndPages) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(s.CreateSandbox({{"metadata", {{"team", i == 1 ? "b" : "a"}}}}));
  auto c = s.Client();
  auto r = c.Request("GET", "/v1/sandboxes?metadata.team=a");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["items"].size(), 2u);
  // Paging: one per page, following next_cursor, sees all three once.
  std::set<std::string> seen;
  std::string cursor;
  for (int page = 0; page < 5; ++page) {
    auto p =
        c.Request("GET", "/v1/sandboxes?limit=1" + (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(p.status, 200);
    auto pj = p.json();
    for (auto& it : pj["items"]) seen.insert(it["id"].get<std::string>());
    if (pj["next_cursor"].is_null()) break;
    cursor = pj["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + ids[0]).status, 204);
  r = c.Request("GET", "/v1/sandboxes?status=running");
  EXPECT_EQ(r.json()["items"].size(), 2u);
  r = c.Request("GET", "/v1/sandboxes?status=bogus");
  EXPECT_EQ(r.status, 400);
}

TEST(ApiSmoke, TtlExpiryReapsAndRenewExtends) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string short_id = s.CreateSandbox({{"ttl_seconds", 1}});
  std::string renewed = s.CreateSandbox({{"ttl_seconds", 1}});
  auto c = s.Client();
  auto r = c.Json("POST", "/v1/sandboxes/" + renewed + "/ttl", {{"ttl_seconds", 60}});
  EXPECT_EQ(r.status, 200) << r.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + short_id).json()["status"], "stopped");
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + renewed).json()["status"], "running");
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/" + short_id + "/exec", {{"cmd", "true"}}).status, 409);
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes", {{"ttl_seconds", -5}}).status, 400);
}

TEST(ApiSmoke, WithoutNetworkingOnlyModeNoneIsServedAndHealthzSaysWhy) {
  TestServer s({"--no-network"});
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  auto r = c.Request("GET", "/v1/sandboxes/" + id + "/network");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["mode"], "none");
  r = c.Request("GET", "/v1/sandboxes/sb_nope/network");
  EXPECT_EQ(r.status, 404);
  r = c.Json("POST", "/v1/sandboxes", {{"network", {{"mode", "all"}}}});
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(r.json()["code"], "not_supported");
  auto h = c.Request("GET", "/healthz").json();
  EXPECT_EQ(h["capabilities"]["network"], false);
  EXPECT_EQ(h["capabilities"]["network_unavailable"], "disabled with --no-network");
}

TEST(ApiSmoke, IdempotencyKeyReturnsTheSameSandbox) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  nlohmann::json body = {{"ttl_seconds", 120}, {"metadata", {{"run", "1"}}}};
  auto first = c.Request("POST", "/v1/sandboxes", body.dump(), {{"Idempotency-Key", "create-abc"}});
  ASSERT_EQ(first.status, 201) << first.body;
  // Same key, same body (fields in another order): the same sandbox, 200.
  auto again = c.Request("POST", "/v1/sandboxes", R"({"metadata":{"run":"1"},"ttl_seconds":120})",
                         {{"Idempotency-Key", "create-abc"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["id"], first.json()["id"]);
  // Same key, another body: conflict, nothing created.
  auto other = c.Request("POST", "/v1/sandboxes", R"({"ttl_seconds":60})",
                         {{"Idempotency-Key", "create-abc"}});
  EXPECT_EQ(other.status, 409);
  EXPECT_EQ(other.json()["code"], "conflict");
  // Concurrent retries of one logical create make one sandbox.
  std::vector<std::thread> ts;
  std::vector<std::string> ids(4);
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] {
      auto cc = s.Client();
      auto r = cc.Request("POST", "/v1/sandboxes", "{}", {{"Idempotency-Key", "race-1"}});
      if (r.status == 200 || r.status == 201)
        ids[static_cast<size_t>(i)] = r.json()["id"].get<std::string>();
    });
  for (auto& t : ts) t.join();
  for (auto& id : ids) EXPECT_EQ(id, ids[0]);
  // Without a key, two creates are two sandboxes; 1 + 1 + 2 in all.
  EXPECT_EQ(c.Request("POST", "/v1/sandboxes", "{}").status, 201);
  EXPECT_EQ(c.Request("POST", "/v1/sandboxes", "{}").status, 201);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), 4u);
  EXPECT_EQ(
      c.Request("POST", "/v1/sandboxes", "{}", {{"Idempotency-Key", std::string(300, 'k')}}).status,
      400);
}

TEST(ApiSmoke, StreamOpenAtExpiryEndsWithSandboxExpiredEvent) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox({{"ttl_seconds", 2}});
  auto c = s.Client();
  std::vector<hutch::client::SseEvent> events;
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.Sse("/v1/sandboxes/" + id + "/exec/stream", {{"cmd", "echo started; sleep 60"}},
                 [&](const hutch::client::SseEvent& e) {
                   events.push_back(e);
                   return true;
                 });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(secs, 30);  // ended by the expiry, not by the command
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event, "error");
  auto d = nlohmann::json::parse(events.back().data, nullptr, false);
  EXPECT_EQ(d["code"], "sandbox_expired") << events.back().data;
  for (const auto& e : events) EXPECT_NE(e.event, "exit");
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "stopped");
}

TEST(ApiSmoke, SandboxMetricsCountCpuMemoryPidsAndDisk) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox({{"disk_mb", 256}});
  auto c = s.Client();
  auto before = c.Request("GET", "/v1/sandboxes/" + id + "/metrics");
  ASSERT_EQ(before.status, 200) << before.body;
  auto b = before.json();
  // 20 MB written, 0.6 s of CPU time burnt (counted in CPU time, not wall
  // time, so a loaded machine only makes it take longer), a sleeper left
  // running.
  auto r = s.Exec(id,
                  "head -c 20000000 /dev/urandom > /home/user/blob && "
                  "python3 -c 'import time\nt = time.process_time()\n"
                  "while time.process_time() - t < 0.6: pass' && "
                  "(sleep 30 >/dev/null 2>&1 &) && echo ok");
  ASSERT_EQ(r["_status"], 200) << r.dump();
  auto a = c.Request("GET", "/v1/sandboxes/" + id + "/metrics").json();
  EXPECT_GE(a["disk_used_bytes"].get<uint64_t>(), b["disk_used_bytes"].get<uint64_t>() + 19000000)
      << a.dump();
  EXPECT_EQ(a["disk_limit_bytes"].get<uint64_t>(), 256ull << 20) << a.dump();
  EXPECT_GE(a["cpu_seconds"].get<double>(), b["cpu_seconds"].get<double>() + 0.5) << a.dump();
  EXPECT_GE(a["pids"].get<uint64_t>(), 2u) << a.dump();  // the agent and the sleeper
  EXPECT_GT(a["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(a["memory_peak_bytes"].get<uint64_t>(), a["memory_bytes"].get<uint64_t>());
  EXPECT_EQ(a["net_rx_bytes"], 0);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/sb_nope/metrics").status, 404);
}
