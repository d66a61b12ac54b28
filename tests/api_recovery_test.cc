// Crash recovery (issue 3): hutchd killed with SIGKILL while sandboxes run,
// while a stream is open, and in the middle of a create; on restart every
// acknowledged sandbox is adopted and works, a deleted one stays deleted,
// an unacknowledged create is either whole or gone without a trace, TTLs
// keep running across the restart, and the host holds nothing the new
// hutchd does not own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/host_probe.h"
#include "tests/support/test_server.h"

using hutch::client::SseEvent;
using hutch::testing::HostSh;
using hutch::testing::TestServer;
using namespace hutch::testing::probe;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Ids and statuses of every sandbox the server lists.
std::map<std::string, std::string> Listed(const TestServer& s) {
  std::map<std::string, std::string> out;
  auto c = s.Client();
  std::string cursor;
  do {
    auto r =
        c.Request("GET", "/v1/sandboxes?limit=100" + (cursor.empty() ? "" : "&cursor=" + cursor));
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = r.json();
    for (auto& it : j["items"]) out[it["id"]] = it["status"];
    cursor = j.contains("next_cursor") && j["next_cursor"].is_string()
                 ? j["next_cursor"].get<std::string>()
                 : "";
  } while (!cursor.empty());
  return out;
}

// The host holds exactly `running` for this server: their dirs and
// cgroups, and no dir, cgroup or process of any other sandbox it made.
void ExpectHostHoldsExactly(const TestServer& s, const std::string& tag,
                            const std::set<std::string>& running,
                            const std::set<std::string>& gone) {
  EXPECT_EQ(SandboxDirs(s), running);
  EXPECT_EQ(CgroupIdsOf(tag), running);
  EXPECT_EQ(SettledLoopIdsOf(s, running), running);
  for (const auto& id : gone) {
    EXPECT_TRUE(ProcsOf(id).empty()) << id << ": process left";
    EXPECT_TRUE(MountsOf(id).empty()) << id << ": mount left";
  }
}

}  // namespace

TEST(Recovery, Kill9WithRunningSandboxesAndAnOpenStream) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string tag = TagOf(s);
  ASSERT_FALSE(tag.empty()) << s.Log();
  std::set<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.insert(s.CreateSandbox({{"ttl_seconds", 600}, {"metadata", {{"n", std::to_string(i)}}}}));
  ASSERT_EQ(ids.size(), 5u);
  const std::string streamed = *ids.begin();
  // Deleted just before the crash: must stay deleted.
  std::string deleted = s.CreateSandbox();
  auto deleted_fp = FootprintOf(s, deleted);
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + deleted).status, 204);

  std::map<std::string, Footprint> before;
  for (const auto& id : ids) before[id] = FootprintOf(s, id);

  // An open stream whose command runs when hutchd dies.
  std::atomic<bool> started{false}, got_exit{false};
  std::thread streamer([&] {
    auto c = s.Client();
    try {
      c.Sse("/v1/sandboxes/" + streamed + "/exec/stream", {{"cmd", "echo up; exec sleep 300"}},
            [&](const SseEvent& e) {
              if (e.event == "stdout") started = true;
              if (e.event == "exit") got_exit = true;
              return true;
            });
    } catch (const std::exception&) {
      // The server died under the stream: that is the point.
    }
  });
  for (int i = 0; i < 500 && !started; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(started);

  s.Kill9();
  streamer.join();
  EXPECT_FALSE(got_exit) << "a stream cut by a crash must end without an exit event";
  // The sandboxes outlive hutchd.
  for (const auto& id : ids) EXPECT_FALSE(ProcsOf(id).empty()) << id << " died with hutchd";

  s.Restart();
  ASSERT_TRUE(s.ok()) << s.Log();
  auto listed = Listed(s);
  for (const auto& id : ids) EXPECT_EQ(listed[id], "running") << id;
  EXPECT_EQ(listed.count(deleted) ? listed[deleted] : "stopped", "stopped");
  for (const auto& id : ids) {
    auto r = s.Exec(id, "echo alive-$((40+2))");
    EXPECT_EQ(r["_status"], 200) << id << " " << r.dump();
    EXPECT_EQ(r.value("stdout", ""), "alive-42\n") << id;
    // Adopted, not recreated: the same agent process still serves it.
    auto now = FootprintOf(s, id);
    ASSERT_FALSE(before[id].procs.empty());
    bool same_agent = false;
    for (const auto& p : now.procs)
      for (const auto& q : before[id].procs) same_agent |= p.pid == q.pid && p.start == q.start;
    EXPECT_TRUE(same_agent) << id;
    // Metadata and the rest of the record came back from the store.
    auto g = s.Client().Request("GET", "/v1/sandboxes/" + id).json();
    EXPECT_TRUE(g["metadata"].contains("n")) << g.dump();
  }
  // The stream's command died with its connection (cancellation reaches
  // the process even when the server is what went away).
  auto ps = s.Exec(streamed, "ps -eo comm= | grep -cx sleep || true");
  EXPECT_EQ(ps.value("stdout", ""), "0\n") << ps.dump();
  // Deleted stays deleted.
  auto ex = s.Client().Json("POST", "/v1/sandboxes/" + deleted + "/exec", {{"cmd", "true"}});
  EXPECT_EQ(ex.status, 409) << ex.body;
  ExpectNothingLeft(s, deleted, deleted_fp);
  ExpectHostHoldsExactly(s, tag, ids, {deleted});
  EXPECT_NE(s.Log().find("adopted=5"), std::string::npos) << s.Log();
}

TEST(Recovery, Kill9DuringCreateLeavesAWholeSandboxOrNoTrace) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string tag = TagOf(s);
  // Kill at several points of a create (before, inside and after the
  // driver's work): each must end whole or without a trace.
  for (int delay_ms : {0, 3, 8, 15, 30, 60}) {
    SCOPED_TRACE("kill after " + std::to_string(delay_ms) + " ms");
    std::thread creator([&] {
      auto c = s.Client();
      try {
        c.Json("POST", "/v1/sandboxes", json::object());
      } catch (const std::exception&) {
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    s.Kill9();
    creator.join();
    s.Restart();
    ASSERT_TRUE(s.ok()) << s.Log();
    std::set<std::string> running, gone;
    for (const auto& [id, status] : Listed(s)) {
      if (status == "running") {
        running.insert(id);
        auto r = s.Exec(id, "echo whole");
        EXPECT_EQ(r.value("stdout", ""), "whole\n") << id << " " << r.dump();
      } else {
        gone.insert(id);
      }
    }
    ExpectHostHoldsExactly(s, tag, running, gone);
  }
}

TEST(Recovery, TtlKeepsRunningAcrossARestart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string tag = TagOf(s);
  auto t0 = std::chrono::steady_clock::now();
  std::string id = s.CreateSandbox({{"ttl_seconds", 2}});
  auto fp = FootprintOf(s, id);
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  // The contract: gone, with everything it had, within 3.5 s of creation.
  std::string status;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(3500)) {
    auto g = s.Client().Request("GET", "/v1/sandboxes/" + id).json();
    status = g.value("status", "");
    if (status == "stopped" && SandboxDirs(s).empty() && CgroupIdsOf(tag).empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, "stopped");
  ExpectNothingLeft(s, id, fp);
  ExpectHostHoldsExactly(s, tag, {}, {id});
}

TEST(Recovery, IdempotencyKeysSurviveARestart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json body = {{"metadata", {{"job", "42"}}}};
  std::map<std::string, std::string> h = {{"Idempotency-Key", "retry-me-1"},
                                          {"Content-Type", "application/json"}};
  auto first = s.Client().Request("POST", "/v1/sandboxes", body.dump(), h);
  ASSERT_EQ(first.status, 201) << first.body;
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto again = s.Client().Request("POST", "/v1/sandboxes", body.dump(), h);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["id"], first.json()["id"]);
  auto other =
      s.Client().Request("POST", "/v1/sandboxes", json({{"metadata", {{"job", "43"}}}}).dump(), h);
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(other.json()["code"], "conflict");
  EXPECT_EQ(Listed(s).size(), 1u);
}

TEST(Recovery, ASecondServerOnTheSameStateDirIsRefused) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string out = HostSh(
      std::string(getenv("HUTCHD_BIN")) + " --listen 127.0.0.1:0 --state-dir " + s.state_dir() +
      "/state --templates-dir " + getenv("HUTCH_TEMPLATES_DIR") + " 2>&1; echo rc=$?");
  EXPECT_NE(out.find("another hutchd is using state dir"), std::string::npos) << out;
  EXPECT_NE(out.find("rc=2"), std::string::npos) << out;
  // And the first one is unharmed.
  EXPECT_EQ(s.Client().Request("GET", "/v1/sandboxes").status, 200);
}

TEST(Recovery, BackgroundProcessesOutliveACrashAndReattach) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto start = s.Client().Json("POST", "/v1/sandboxes/" + id + "/processes",
                               {{"cmd", "for i in $(seq 1 30); do echo $i; sleep 0.05; done"}});
  ASSERT_EQ(start.status, 201) << start.body;
  const int pid = start.json()["pid"];
  s.Kill9();  // while it runs: the agent keeps running it and buffering
  s.Restart();
  ASSERT_TRUE(s.ok());
  std::string out;
  int exit_code = -1;
  auto c = s.Client();
  auto r = c.SseRequest(
      "GET", "/v1/sandboxes/" + id + "/processes/" + std::to_string(pid) + "/stream?from=0", "", {},
      [&](const SseEvent& e) {
        if (e.event == "stdout") out += json::parse(e.data).value("text", "");
        if (e.event == "exit") exit_code = json::parse(e.data).value("exit_code", -1);
        return true;
      });
  EXPECT_EQ(r.status, 200) << r.body;
  std::string want;
  for (int i = 1; i <= 30; ++i) want += std::to_string(i) + "\n";
  EXPECT_EQ(out, want);
  EXPECT_EQ(exit_code, 0);
}
