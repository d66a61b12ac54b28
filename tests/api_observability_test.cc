// What an operator sees of a running hutchd: /metrics as Prometheus reads
// it, the per-key rate limit as a client meets it, and JSON log lines that
// a log pipeline can parse and join to the requests that caused them.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/exposition.h"
#include "tests/support/test_server.h"

using hutch::testing::ParseExposition;
using hutch::testing::PromParse;
using hutch::testing::TestServer;

namespace {

// GET /metrics without a key, checked line by line.
PromParse Scrape(const TestServer& s) {
  auto c = s.Client();
  c.set_api_key("");
  auto r = c.Request("GET", "/metrics");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u)
      << r.header("content-type");
  PromParse p = ParseExposition(r.body);
  EXPECT_TRUE(p.ok()) << p.error << "\n" << r.body;
  return p;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

}  // namespace

TEST(ApiObservability, MetricsCountCreatesErrorsAndRequests) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  auto c = s.Client();
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/sb_doesnotexist").status, 404);
  EXPECT_EQ(s.Exec(id, "true")["_status"], 200);
  auto anon = s.Client();
  anon.set_api_key("wrong");
  EXPECT_EQ(anon.Request("GET", "/v1/sandboxes").status, 401);

  PromParse p = Scrape(s);
  EXPECT_EQ(p.types["hutch_sandbox_create_seconds"], "histogram");
  EXPECT_GE(p.Value("hutch_sandbox_create_seconds_count").value_or(0), 1);
  EXPECT_GT(p.Value("hutch_sandbox_create_seconds_sum").value_or(0), 0);
  // The buckets span 5 ms to 30 s.
  EXPECT_TRUE(p.Value("hutch_sandbox_create_seconds_bucket", {{"le", "0.005"}}).has_value());
  EXPECT_TRUE(p.Value("hutch_sandbox_create_seconds_bucket", {{"le", "30"}}).has_value());
  EXPECT_GE(p.Value("hutch_sandbox_create_seconds_bucket", {{"le", "+Inf"}}).value_or(0), 1);
  EXPECT_EQ(p.Value("hutch_sandboxes", {{"state", "running"}}), 1);
  EXPECT_EQ(p.Value("hutch_sandboxes", {{"state", "failed"}}), 0);
  EXPECT_EQ(p.Value("hutch_sandboxes_running"), 1);  // the first release's name still works
  EXPECT_EQ(p.Value("hutch_sandboxes_created_total"), 1);
  EXPECT_EQ(p.Value("hutch_sandbox_create_failures_total"), 0);
  EXPECT_GE(p.Value("hutch_execs_total").value_or(0), 1);
  EXPECT_GE(p.Value("hutch_errors_total", {{"code", "sandbox_not_found"}}).value_or(0), 1);
  EXPECT_GE(p.Value("hutch_errors_total", {{"code", "unauthorized"}}).value_or(0), 1);
  EXPECT_GE(p.Value("hutch_http_requests_total", {{"method", "POST"}, {"status_class", "2xx"}})
                .value_or(0),
            2);
  EXPECT_GE(p.Value("hutch_http_requests_total", {{"method", "GET"}, {"status_class", "4xx"}})
                .value_or(0),
            2);
  EXPECT_EQ(p.Value("hutch_open_streams"), 0);
  EXPECT_GT(p.Value("hutch_process_uptime_seconds").value_or(0), 0);

  // Deleting moves the sandbox from running to stopped.
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  p = Scrape(s);
  EXPECT_EQ(p.Value("hutch_sandboxes", {{"state", "running"}}), 0);
  EXPECT_EQ(p.Value("hutch_sandboxes", {{"state", "stopped"}}), 1);
  EXPECT_EQ(p.Value("hutch_errors_total", {{"code", "sandbox_not_found"}}), 1);
}

TEST(ApiObservability, StreamErrorEventsAreCountedByCode) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox({{"ttl_seconds", 1}});
  auto c = s.Client();
  std::string last;
  auto r = c.Sse("/v1/sandboxes/" + id + "/exec/stream", {{"cmd", "sleep 60"}},
                 [&](const hutch::client::SseEvent& e) {
                   last = e.event;
                   return true;
                 });
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(last, "error");
  EXPECT_EQ(Scrape(s).Value("hutch_errors_total", {{"code", "sandbox_expired"}}), 1);
}

TEST(ApiObservability, RateLimitPerKeyWithRetryAfter) {
  // Two keys, from a keys file (HUTCH_API_KEY would override it); the
  // TestServer's own key is the first.
  std::string dir = hutch::testing::TempDir("hutch-keys");
  std::string keys = dir + "/keys";
  std::ofstream(keys) << "test-key-0123456789\nsecond-key-abcdefghij\n";
  TestServer s({"--rate-limit", "2", "--rate-burst", "3", "--keys-file", keys},
               /*with_env_key=*/false);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s.key(), "test-key-0123456789");

  // Requests without a valid key are refused before the limiter: they
  // cannot spend a real key's tokens.
  auto intruder = s.Client();
  intruder.set_api_key("test-key-wrong");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(intruder.Request("GET", "/v1/sandboxes").status, 401);

  auto a = s.Client();
  // The burst of 3 is whole (refill during the loop can only add to it).
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.Request("GET", "/v1/sandboxes").status, 200) << i;
  hutch::client::Response limited;
  for (int i = 0; i < 20 && limited.status != 429; ++i) limited = a.Request("GET", "/v1/sandboxes");
  ASSERT_EQ(limited.status, 429) << limited.body;
  auto j = limited.json();
  EXPECT_EQ(j["code"], "rate_limited");
  EXPECT_EQ(j["retryable"], true);
  EXPECT_EQ(j["request_id"], limited.header("x-request-id"));
  int retry_after = std::stoi(limited.header("retry-after"));
  EXPECT_GE(retry_after, 1);

  // Another key has its own bucket.
  auto b = s.Client();
  b.set_api_key("second-key-abcdefghij");
  EXPECT_EQ(b.Request("GET", "/v1/sandboxes").status, 200);
  // Probes are never limited.
  auto anon = s.Client();
  anon.set_api_key("");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(anon.Request("GET", "/healthz").status, 200);
    EXPECT_EQ(anon.Request("GET", "/metrics").status, 200);
  }
  // After Retry-After, the key works again.
  std::this_thread::sleep_for(std::chrono::seconds(retry_after) + std::chrono::milliseconds(100));
  EXPECT_EQ(a.Request("GET", "/v1/sandboxes").status, 200);

  PromParse p = Scrape(s);
  EXPECT_GE(p.Value("hutch_errors_total", {{"code", "rate_limited"}}).value_or(0), 1);
  EXPECT_EQ(p.Value("hutch_errors_total", {{"code", "unauthorized"}}), 10);
  // The key never appears in the log, limited or not.
  EXPECT_EQ(s.Log().find("test-key-0123456789"), std::string::npos);
  EXPECT_EQ(s.Log().find("second-key-abcdefghij"), std::string::npos);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(ApiObservability, JsonLogLinesParseAndCarryRequestAndSandbox) {
  TestServer s({"--log-format", "json"});
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  auto c = s.Client();
  auto r = c.Request("GET", "/v1/sandboxes/" + id, "", {{"X-Request-Id", "obs-req-42"}});
  EXPECT_EQ(r.status, 200);
  // Hostile bytes in the path: quote, backslash, newline, not UTF-8.
  r = c.Request("GET", "/v1/sandboxes/sb_%22x%5C%0Ay%FF%20z=1", "",
                {{"X-Request-Id", "obs-req-odd"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  ASSERT_EQ(s.Stop(), 0);  // every line written and flushed

  bool saw_access = false, saw_odd = false, saw_created = false, saw_stopped = false;
  int parsed = 0;
  for (const auto& line : Lines(s.Log())) {
    // hutchd's start banner on stdout is for people, not a log line.
    if (line.rfind("hutchd listening on http://", 0) == 0) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON log line: " << line;
    ++parsed;
    EXPECT_TRUE(j.contains("ts") && j["ts"].is_string()) << line;
    EXPECT_TRUE(j.contains("level") && j["level"].is_string()) << line;
    EXPECT_TRUE(j.contains("event") || j.contains("msg")) << line;
    for (auto it = j.begin(); it != j.end(); ++it)
      EXPECT_TRUE(it->is_string()) << it.key() << " in " << line;
    if (j.value("event", "") == "http" && j.value("request_id", "") == "obs-req-42") {
      saw_access = true;
      EXPECT_EQ(j["sandbox"], id);
      EXPECT_EQ(j["method"], "GET");
      EXPECT_EQ(j["status"], "200");
      EXPECT_EQ(j["path"], "/v1/sandboxes/" + id);
      EXPECT_TRUE(j.contains("duration_ms"));
    }
    if (j.value("event", "") == "http" && j.value("request_id", "") == "obs-req-odd") {
      saw_odd = true;
      EXPECT_EQ(j["status"], "404");
      EXPECT_EQ(j["sandbox"], "sb_%22x%5C%0Ay%FF%20z=1");  // escaped, one token
    }
    if (j.value("sandbox", "") == id && j.value("event", "") == "created") saw_created = true;
    if (j.value("sandbox", "") == id && j.value("event", "") == "stopped") saw_stopped = true;
  }
  EXPECT_GT(parsed, 3);
  EXPECT_TRUE(saw_access) << s.Log();
  EXPECT_TRUE(saw_odd) << s.Log();
  EXPECT_TRUE(saw_created) << s.Log();
  EXPECT_TRUE(saw_stopped) << s.Log();
}

TEST(ApiObservability, TextLogKeepsItsShapeWithRequestAndSandbox) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id, "", {{"X-Request-Id", "txt-req-7"}}).status,
            200);
  // The access line is written just after the answer; the next request on
  // the same connection is read only after that.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
  std::string want = " info http method=GET path=/v1/sandboxes/" + id +
                     " status=200 request_id=txt-req-7 sandbox=" + id + " duration_ms=";
  EXPECT_NE(s.Log().find(want), std::string::npos) << s.Log();
}

// The jail driver's disk pool is visible: after a start it fills to
// --warm-disks images of the default size (a first burst of creates takes
// them), a create takes one and the pool makes it again; 0 keeps none.
TEST(ApiObservability, DiskPoolGaugesFollowTheWarmDisks) {
  TestServer s({"--warm-disks", "6"});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.WaitForPoolsFilled());
  PromParse p = Scrape(s);
  EXPECT_EQ(p.types["hutch_disk_pool_ready"], "gauge");
  EXPECT_EQ(p.Value("hutch_disk_pool_target").value_or(-1), 6);
  EXPECT_EQ(p.Value("hutch_disk_pool_ready").value_or(-1), 6);
  const std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(s.WaitForPoolsFilled());
  EXPECT_EQ(Scrape(s).Value("hutch_disk_pool_ready").value_or(-1), 6);

  TestServer none({"--warm-disks", "0"});
  ASSERT_TRUE(none.ok());
  const std::string other = none.CreateSandbox();
  EXPECT_FALSE(other.empty());
  PromParse q = Scrape(none);
  EXPECT_EQ(q.Value("hutch_disk_pool_target").value_or(-1), 0);
  EXPECT_EQ(q.Value("hutch_disk_pool_ready").value_or(-1), 0);
}
