// GET /v1/sandboxes?watch=true against the real hutchd: the whole list
// first, then a create and a delete made by another client arrive as
// `upsert` and `remove` within a second or so; the filter applies; a bad
// `watch` value is a JSON 400.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tests/support/test_server.h"

using hutch::testing::TestServer;
using hutch::testing::WaitFor;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Seen {
  std::mutex mu;
  std::vector<std::pair<std::string, json>> events;
  bool Has(const std::string& event, const std::string& id) {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [e, j] : events) {
      if (e != event) continue;
      if (e == "list") return true;
      if (j.value("id", "") == id) return true;
    }
    return false;
  }
};

TEST(ApiWatch, CreatesAndDeletesArriveAsEvents) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string before = s.CreateSandbox();
  Seen seen;
  std::atomic<bool> stop{false};
  auto watcher = s.Client();
  std::thread t([&] {
    try {
      watcher.SseRequest("GET", "/v1/sandboxes?watch=true&status=running", "", {},
                         [&](const hutch::client::SseEvent& ev) {
                           std::lock_guard<std::mutex> l(seen.mu);
                           seen.events.emplace_back(ev.event, json::parse(ev.data, nullptr, false));
                           return !stop.load();
                         });
    } catch (const std::exception&) {
      // the socket shut down below
    }
  });
  ASSERT_TRUE(WaitFor([&] { return seen.Has("list", ""); }, std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> l(seen.mu);
    const json& items = seen.events[0].second["items"];
    ASSERT_EQ(items.size(), 1u) << items.dump();
    EXPECT_EQ(items[0]["id"], before);
  }
  const auto t0 = Clock::now();
  const std::string id = s.CreateSandbox();
  EXPECT_TRUE(WaitFor([&] { return seen.Has("upsert", id); }, std::chrono::seconds(5)));
  const auto shown = Clock::now() - t0;
  EXPECT_LT(shown, std::chrono::seconds(2));
  auto c = s.Client();
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_TRUE(WaitFor([&] { return seen.Has("remove", id); }, std::chrono::seconds(5)));
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + before + "/pause").status, 200);
  EXPECT_TRUE(WaitFor([&] { return seen.Has("remove", before); }, std::chrono::seconds(5)));
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + before).status, 204);
  stop = true;
  ::shutdown(watcher.native_handle(), SHUT_RDWR);
  t.join();
}

TEST(ApiWatch, BadValueIsRefused) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto r = c.Request("GET", "/v1/sandboxes?watch=maybe");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["code"], "invalid_request");
  r = c.Request("GET", "/v1/sandboxes?watch=false");
  EXPECT_EQ(r.status, 200) << r.body;
  c.set_api_key("");
  r = c.Request("GET", "/v1/sandboxes?watch=true");
  EXPECT_EQ(r.status, 401) << r.body;
}

}  // namespace
