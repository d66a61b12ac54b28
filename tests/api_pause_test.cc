// Pause and resume (cgroup freezer): a paused sandbox keeps its memory and
// processes but gets no CPU; it stays paused across a hutchd crash; resume
// continues exactly where it stopped.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/host_probe.h"
#include "tests/support/test_server.h"

using hutch::testing::TestServer;
using namespace hutch::testing::probe;
using nlohmann::json;

namespace {

// The counter file, read from the host through the agent's /proc root:
// works while the sandbox is frozen, when no exec can run.
long CounterFromHost(const std::string& id) {
  for (const auto& p : ProcsOf(id)) {
    std::string v = ReadFile("/proc/" + std::to_string(p.pid) + "/root/tmp/counter");
    if (!v.empty()) return std::stol(v);
  }
  return -1;
}

long CounterViaExec(TestServer& s, const std::string& id) {
  auto r = s.Exec(id, "cat /tmp/counter");
  EXPECT_EQ(r["_status"], 200) << r.dump();
  std::string out = r.value("stdout", "");
  return out.empty() ? -1 : std::stol(out);
}

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST(Pause, CounterStopsWhilePausedAndContinuesAfterResume) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  auto st =
      c.Json("POST", "/v1/sandboxes/" + id + "/exec",
             {{"cmd",
               "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; "
               "mv /tmp/counter.new /tmp/counter; sleep 0.02; done' >/dev/null 2>&1 & echo ok"},
              {"detach", true}});
  ASSERT_EQ(st.status, 200) << st.body;
  long c0 = -1;
  for (int i = 0; i < 100 && (c0 = CounterFromHost(id)) < 3; ++i) Sleep(20);
  ASSERT_GE(c0, 3) << "the counter loop did not start";

  auto p = c.Request("POST", "/v1/sandboxes/" + id + "/pause");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.json()["status"], "paused");
  EXPECT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);  // idempotent
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "paused");
  long frozen = CounterFromHost(id);
  Sleep(600);
  EXPECT_EQ(CounterFromHost(id), frozen) << "the counter grew while paused";
  // Work on a paused sandbox is refused with conflict, not queued.
  auto ex = c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}});
  EXPECT_EQ(ex.status, 409) << ex.body;
  EXPECT_EQ(ex.json()["code"], "conflict");
  // TTL renewal is still allowed.
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/ttl", {{"ttl_seconds", 600}}).status, 200);

  // It stays paused across a crash of hutchd.
  s.Kill9();
  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c2 = s.Client();
  EXPECT_EQ(c2.Request("GET", "/v1/sandboxes/" + id).json()["status"], "paused");
  Sleep(300);
  EXPECT_EQ(CounterFromHost(id), frozen) << "the counter ran while paused across the restart";

  auto r = c2.Request("POST", "/v1/sandboxes/" + id + "/resume");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["status"], "running");
  EXPECT_EQ(c2.Request("POST", "/v1/sandboxes/" + id + "/resume").status, 200);  // idempotent
  // It continues from where it stopped (not from 0, not far ahead).
  long after = CounterViaExec(s, id);
  EXPECT_GE(after, frozen);
  EXPECT_LT(after, frozen + 25) << "the counter ran on while paused";
  long later = -1;
  for (int i = 0; i < 100 && (later = CounterViaExec(s, id)) <= after; ++i) Sleep(20);
  EXPECT_GT(later, after) << "the counter did not continue after resume";

  // A paused sandbox can be deleted (its frozen processes die too).
  ASSERT_EQ(c2.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
  auto fp = FootprintOf(s, id);
  EXPECT_EQ(c2.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  ExpectNothingLeft(s, id, fp);
  // And a stopped one cannot be paused or resumed.
  EXPECT_EQ(c2.Request("POST", "/v1/sandboxes/" + id + "/resume").status, 409);
  EXPECT_EQ(c2.Request("POST", "/v1/sandboxes/sb_nope/pause").status, 404);
}

TEST(Pause, ExecWithAutoResumeResumesAPausedSandbox) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  auto c = s.Client();
  ASSERT_EQ(s.Exec(id, "echo kept > /tmp/f").value("exit_code", -1), 0);
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
  // Without the flag: refused. With it: resumed, run, and left running.
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}}).status, 409);
  auto r = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                  {{"cmd", "cat /tmp/f"}, {"auto_resume", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["stdout"], "kept\n");
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "running");
  // The same for a background process start.
  ASSERT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
  auto p = c.Json("POST", "/v1/sandboxes/" + id + "/processes",
                  {{"cmd", "sleep 1"}, {"auto_resume", true}});
  EXPECT_EQ(p.status, 201) << p.body;
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "running");
  EXPECT_EQ(
      c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}, {"auto_resume", "yes"}})
          .status,
      400);
}

TEST(Pause, IdlePolicyPausesAnUnusedSandboxAndTheNextRequestResumesIt) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  std::string id = s.CreateSandbox({{"auto_pause_seconds", 1}});
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["auto_pause_seconds"], 1);
  // A command that runs longer than the idle time keeps the sandbox awake.
  json long_exec;
  std::thread t([&] { long_exec = s.Exec(id, "sleep 2.5; echo done"); });
  Sleep(2000);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "running");
  t.join();
  EXPECT_EQ(long_exec.value("stdout", ""), "done\n") << long_exec.dump();

  ASSERT_EQ(s.Exec(id,
                   "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; "
                   "mv /tmp/counter.new /tmp/counter; sleep 0.02; done' >/dev/null 2>&1 &")
                .value("exit_code", -1),
            0);
  // Left alone, it is paused by the policy (GET does not wake it).
  json rec;
  for (int i = 0; i < 100; ++i) {
    rec = c.Request("GET", "/v1/sandboxes/" + id).json();
    if (rec["status"] == "paused") break;
    Sleep(50);
  }
  ASSERT_EQ(rec["status"], "paused") << rec.dump();
  EXPECT_EQ(rec["paused_by"], "idle");
  long frozen = CounterFromHost(id);
  Sleep(300);
  EXPECT_EQ(CounterFromHost(id), frozen);
  // Any request that needs it running wakes it: no flag needed.
  long after = CounterViaExec(s, id);
  EXPECT_GE(after, frozen);
  EXPECT_LT(after, frozen + 25);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id).json()["status"], "running");

  // An explicit pause is not undone by requests.
  for (int i = 0; i < 100 && c.Request("GET", "/v1/sandboxes/" + id).json()["status"] != "paused";
       ++i)
    Sleep(50);
  auto p = c.Request("POST", "/v1/sandboxes/" + id + "/pause");
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.json()["paused_by"], "api");
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "true"}}).status, 409);
  EXPECT_EQ(c.Json("POST", "/v1/sandboxes", {{"auto_pause_seconds", -1}}).status, 400);
}
