// Faults (design: security-and-reliability.md, "Faults"): the agent dying
// inside a sandbox, the host state dir filling up, and hutchd killed with
// SIGKILL while requests are in flight. Each ends with nothing lost and
// nothing leaked, checked by inventorying the host: processes, cgroups,
// mounts and directories of the sandboxes. (TTL expiry during a stream is
// ApiSmoke.StreamOpenAtExpiryEndsWithSandboxExpiredEvent; kill -9 at each
// point of a create is tests/api_recovery_test.cc.)
//
// With the vm driver (HUTCH_TEST_DRIVER=vm) the agent is PID 1 of a guest
// kernel, which dies with it (and QEMU exits): the agent-death test kills
// the sandbox's QEMU, the one host process that holds the agent. Booting is
// seconds of TCG per sandbox, so the kill -9 test waits for acknowledged
// creates instead of a fixed few seconds of load, and the full state dir
// is big enough for the template's disk image.
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/host_probe.h"
#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::client::SseEvent;
using hutch::testing::HostSh;
using hutch::testing::OnVm;
using hutch::testing::TestServer;
using namespace hutch::testing::probe;
using nlohmann::json;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

// The host pid of the sandbox's PID 1 (the agent): the process of its
// cgroup whose innermost pid-namespace pid is 1.
pid_t AgentPid(const std::string& id) {
  for (const auto& p : ProcsOf(id)) {
    std::istringstream in(ReadFile("/proc/" + std::to_string(p.pid) + "/status"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream f(line.substr(6));
      std::string last, v;
      while (f >> v) last = v;
      if (last == "1") return p.pid;
    }
  }
  return -1;
}

}  // namespace

TEST(Faults, AgentDeathFailsTheSandboxEndsItsStreamAndDeleteCleansUp) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_EQ(s.Exec(id, "echo hi")["stdout"], "hi\n");
  std::string other = s.CreateSandbox();  // a neighbour that must not notice
  Footprint before = FootprintOf(s, id);
  ExpectLiveFootprint(before, id, 1);
  pid_t agent = OnVm() ? hutch::testing::vm::QemuPid(s, id) : AgentPid(id);
  ASSERT_GT(agent, 0) << "no process with NSpid 1 in the sandbox's cgroup (or no QEMU)";
  if (OnVm()) {
    ASSERT_TRUE(hutch::testing::vm::IsQemu(agent)) << agent;
  }

  // A stream is open when the agent dies: it must end with an error event,
  // not hang and not claim an exit.
  std::vector<SseEvent> events;
  std::atomic<bool> ticking{false};
  std::thread killer([&] {
    for (int i = 0; i < 200 && !ticking; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(agent, SIGKILL);
  });
  auto c = s.Client();
  auto r = c.Sse("/v1/sandboxes/" + id + "/exec/stream",
                 {{"cmd", "while :; do echo tick; sleep 0.1; done"}}, [&](const SseEvent& e) {
                   events.push_back(e);
                   if (e.event == "stdout") ticking = true;
                   return true;
                 });
  killer.join();
  EXPECT_EQ(r.status, 200);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event, "error") << events.back().data;
  for (const auto& e : events) EXPECT_NE(e.event, "exit");

  // The sandbox is failed, with a reason that names the agent.
  json got;
  for (int i = 0; i < 100; ++i) {
    got = c.Request("GET", "/v1/sandboxes/" + id).json();
    if (got.value("status", ""s) == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(got.value("status", ""s), "failed") << got.dump();
  if (OnVm()) {
    // Whichever the server saw first: the agent's connection or QEMU's end.
    const std::string d = got.dump();
    EXPECT_TRUE(d.find("agent") != std::string::npos || d.find("qemu") != std::string::npos ||
                d.find("vm exited") != std::string::npos)
        << d;
  } else {
    EXPECT_NE(got.dump().find("agent"), std::string::npos) << got.dump();
  }
  // Work on it answers a clear error, not a hang or a 500.
  auto e = s.Exec(id, "echo no");
  EXPECT_EQ(e["_status"], 409) << e.dump();
  EXPECT_EQ(e.value("code", ""s), "sandbox_not_running") << e.dump();

  // It can be deleted, and nothing of it is left.
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  ExpectNothingLeft(s, id, before);
  EXPECT_EQ(s.Exec(other, "echo fine")["stdout"], "fine\n");
}

namespace {

// A request that gets no answer within `limit` is aborted (its socket shut
// down) instead of hanging the test: status 0 then.
hutch::client::Response Bounded(hutch::client::HttpClient& c, std::chrono::seconds limit,
                                const std::function<hutch::client::Response()>& call) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock l(m);
    if (!cv.wait_for(l, limit, [&] { return done; })) shutdown(c.native_handle(), SHUT_RDWR);
  });
  hutch::client::Response r;
  try {
    r = call();
  } catch (const std::exception&) {
    r.status = 0;
  }
  {
    std::lock_guard l(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  return r;
}

}  // namespace

// An agent that stops answering (its processes starve it, or something
// stopped it: here SIGSTOP from the host, of the agent or of the VM's
// QEMU) must not hold API requests forever. Each kind of request answers
// 504 agent_timeout after --agent-timeout; the server serves the other
// sandboxes meanwhile; once the agent runs again the sandbox works as
// before and the abandoned requests left nothing behind.
TEST(Faults, AgentThatStopsAnsweringFailsRequestsWithAgentTimeoutAndRecovers) {
  TestServer s({"--agent-timeout", "2"});
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  std::string other = s.CreateSandbox();
  ASSERT_EQ(s.Exec(id, "echo hi > /tmp/f; cat /tmp/f")["stdout"], "hi\n");
  pid_t agent = OnVm() ? hutch::testing::vm::QemuPid(s, id) : AgentPid(id);
  ASSERT_GT(agent, 0);
  auto c = s.Client();
  const std::string base = "/v1/sandboxes/" + id;

  // Two commands with a timeout run when the agent stops: it can neither
  // kill them at their timeout nor send their exits. Their readers (a
  // blocking exec, an SSE stream) give up --agent-timeout after it.
  const json slow = {{"cmd", "touch /tmp/started-$MARK; sleep 60"}, {"timeout_seconds", 10}};
  hutch::client::Response blocking;
  std::vector<SseEvent> streamed;
  std::thread blocking_reader([&] {
    auto c2 = s.Client();
    json body = slow;
    body["env"] = {{"MARK", "a"}};
    blocking = Bounded(c2, std::chrono::seconds(60),
                       [&] { return c2.Json("POST", base + "/exec", body); });
  });
  std::thread stream_reader([&] {
    auto c3 = s.Client();
    json body = slow;
    body["env"] = {{"MARK", "b"}};
    Bounded(c3, std::chrono::seconds(60), [&] {
      return c3.Sse(base + "/exec/stream", body, [&](const SseEvent& e) {
        streamed.push_back(e);
        return true;
      });
    });
  });
  for (int i = 0; i < 200; ++i) {
    if (c.Request("GET", base + "/fs/stat?path=/tmp/started-a").status == 200 &&
        c.Request("GET", base + "/fs/stat?path=/tmp/started-b").status == 200)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(kill(agent, SIGSTOP), 0);
  // Runs again whatever fails below (disarmed once resumed: the pid may
  // be reused after the sandbox is gone).
  struct ResumeAtExit {
    pid_t pid;
    ~ResumeAtExit() {
      if (pid > 0) kill(pid, SIGCONT);
    }
  } resume{agent};
  auto expect_timeout = [](const std::string& what, const hutch::client::Response& r) {
    EXPECT_EQ(r.status, 504) << what << ": " << r.body;
    const json j = r.json();
    EXPECT_EQ(j.is_object() ? j.value("code", ""s) : "", "agent_timeout") << what << ": " << r.body;
    EXPECT_TRUE(j.is_object() && j.value("retryable", false)) << what << ": " << r.body;
  };
  const auto limit = std::chrono::seconds(30);
  expect_timeout("file read",
                 Bounded(c, limit, [&] { return c.Request("GET", base + "/fs?path=/tmp/f"); }));
  expect_timeout("list",
                 Bounded(c, limit, [&] { return c.Request("GET", base + "/fs/list?path=/tmp"); }));
  expect_timeout("upload", Bounded(c, limit, [&] {
                   return c.Request("PUT", base + "/fs?path=/tmp/g", "data");
                 }));
  expect_timeout("exec", Bounded(c, limit, [&] {
                   return c.Json("POST", base + "/exec", {{"cmd", "touch /tmp/x"}});
                 }));
  expect_timeout("process start", Bounded(c, limit, [&] {
                   return c.Json("POST", base + "/processes", {{"cmd", "touch /tmp/y"}});
                 }));
  expect_timeout("process list",
                 Bounded(c, limit, [&] { return c.Request("GET", base + "/processes"); }));

  blocking_reader.join();
  stream_reader.join();
  expect_timeout("blocking exec past its timeout", blocking);
  ASSERT_FALSE(streamed.empty());
  EXPECT_EQ(streamed.front().event, "start");
  EXPECT_EQ(streamed.back().event, "error") << streamed.back().data;
  EXPECT_NE(streamed.back().data.find("agent_timeout"), std::string::npos) << streamed.back().data;

  // The server kept serving; the stopped sandbox is still running.
  EXPECT_EQ(s.Exec(other, "echo fine")["stdout"], "fine\n");
  EXPECT_EQ(c.Request("GET", base).json().value("status", ""s), "running");

  ASSERT_EQ(kill(agent, SIGCONT), 0);
  resume.pid = -1;
  auto again = s.Exec(id, "cat /tmp/f");
  EXPECT_EQ(again["stdout"], "hi\n") << again.dump();
  auto r = c.Request("GET", base + "/fs?path=/tmp/f");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hi\n");
  // The abandoned upload left no file (its temp file went with the cancel).
  EXPECT_EQ(c.Request("GET", base + "/fs/stat?path=/tmp/g").status, 404);
  EXPECT_EQ(c.Request("DELETE", base).status, 204);
}

namespace {

// Mounts a small tmpfs as the server's state dir (after the first start,
// so TestServer's own layout stays) and takes it away at the end: stops
// hutchd first, since it holds the database open there.
class SmallStateDir {
 public:
  SmallStateDir(TestServer& s, int mb) : s_(s), dir_(s.state_dir() + "/state") {
    s_.Stop();
    ok_ = mount("hutch-test-full", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                ("size=" + std::to_string(mb) + "m").c_str()) == 0;
    if (ok_) s_.Restart();
  }
  ~SmallStateDir() {
    if (!ok_) return;
    s_.Stop();
    umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }

 private:
  TestServer& s_;
  std::string dir_;
  bool ok_ = false;
};

}  // namespace

TEST(Faults, StateDirDiskFullFailsCreatesClearlyAndKeepsRunningSandboxes) {
  // Disks the pool made before the state dir filled let creates go on
  // (a take is a rename) until it is drained, and 32 of them (the default)
  // would fill this small state dir by themselves: a pool of two keeps the
  // test about a full disk, and shows a drained pool ends in the same 507.
  TestServer s({"--warm-disks", "2"});
  ASSERT_TRUE(s.ok());
  // A vm sandbox needs its template's disk image in the state dir (built at
  // its first create): room for it, then filled all the same.
  SmallStateDir small(s, OnVm() ? 1536 : 32);
  ASSERT_TRUE(small.ok()) << "mount tmpfs: " << strerror(errno);
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_EQ(s.Exec(id, "echo before")["stdout"], "before\n");
  ASSERT_TRUE(s.WaitForPoolsFilled());

  // Fill the state dir's filesystem to the last byte.
  std::string filler = s.state_dir() + "/state/filler";
  HostSh("dd if=/dev/zero of=" + filler + " bs=64k 2>/dev/null; sync");
  ASSERT_GT(fs::file_size(filler), 8u << 20);

  auto c = s.Client();
  int refused = 0;
  std::vector<std::string> made;
  for (int i = 0; i < 6 && refused < 3; ++i) {
    auto r = c.Json("POST", "/v1/sandboxes", json::object());
    if (r.status == 201) {  // a pooled disk, or SQLite still fit a row in a free page
      made.push_back(r.json().value("id", ""s));
      continue;
    }
    ++refused;
    auto j = r.json();
    EXPECT_EQ(r.status, 507) << r.body;
    EXPECT_EQ(j.value("code", ""s), "storage_full") << r.body;
    EXPECT_NE(j.value("message", ""s), "") << r.body;
  }
  EXPECT_GT(refused, 0) << "every create succeeded on a full state dir";
  // A refused create leaves no sandbox behind.
  auto list = c.Request("GET", "/v1/sandboxes?limit=100").json();
  for (auto& it : list["items"]) EXPECT_NE(it.value("status", ""s), "creating") << list.dump();

  // The running sandbox keeps working, files included.
  EXPECT_EQ(s.Exec(id, "echo during")["stdout"], "during\n");
  EXPECT_EQ(c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/tmp/x", "data",
                      {{"Content-Type", "application/octet-stream"}})
                    .status /
                100,
            2);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/tmp/x").body, "data");

  // Space comes back: creates work again without a restart.
  fs::remove(filler);
  std::string again = s.CreateSandbox();
  EXPECT_EQ(s.Exec(again, "echo after")["stdout"], "after\n");
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + again).status, 204);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  for (const auto& m : made) EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + m).status, 204);
}

TEST(Faults, Kill9UnderLoadLosesNothingAcknowledgedAndLeaksNothing) {
  TestServer s({"--max-sandboxes", "64"});
  ASSERT_TRUE(s.ok());
  const std::string tag = TagOf(s);
  ASSERT_FALSE(tag.empty());

  // Four clients create, exec, write and delete in a loop; each remembers
  // what the server acknowledged.
  std::mutex mu;
  std::set<std::string> acked_alive, acked_deleted, ever;
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      auto c = s.Client();
      std::string deleting;  // a delete whose answer the crash may have eaten
      for (int i = 0; !stop; ++i) try {
          auto r = c.Json("POST", "/v1/sandboxes", json::object());
          if (r.status != 201) continue;
          std::string id = r.json().value("id", ""s);
          {
            std::lock_guard<std::mutex> l(mu);
            acked_alive.insert(id);
            ever.insert(id);
          }
          c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                 {{"cmd", "echo " + std::to_string(t) + " > /tmp/mark"}});
          deleting = i % 2 == 0 ? id : "";
          if (i % 2 == 0 && c.Request("DELETE", "/v1/sandboxes/" + id).status == 204) {
            std::lock_guard<std::mutex> l(mu);
            acked_alive.erase(id);
            acked_deleted.insert(id);
          }
          deleting.clear();
        } catch (const std::exception&) {
          c.Close();                // the server died under us: expected once
          if (!deleting.empty()) {  // sent, unanswered: either outcome is right
            std::lock_guard<std::mutex> l(mu);
            acked_alive.erase(deleting);
            deleting.clear();
          }
        }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  // A VM boots in seconds of TCG: let the load get a few creates through.
  for (int i = 0; OnVm() && i < 240; ++i) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (ever.size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  s.Kill9();
  stop = true;
  for (auto& th : load) th.join();
  ASSERT_FALSE(ever.empty());

  s.Restart();
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  // Every page: the deleted ones' tombstones are listed too, and a fast
  // machine makes more than one page of them in the load's 3 s.
  std::map<std::string, std::string> listed;
  std::string cursor;
  do {
    auto lj =
        c.Request("GET", "/v1/sandboxes?limit=100" + (cursor.empty() ? "" : "&cursor=" + cursor))
            .json();
    for (auto& it : lj["items"]) listed[it["id"]] = it["status"];
    cursor = lj["next_cursor"].is_string() ? lj["next_cursor"].get<std::string>() : "";
  } while (!cursor.empty());

  // Every acknowledged, undeleted sandbox is back and usable; every
  // acknowledged delete stayed deleted.
  for (const auto& id : acked_alive) {
    ASSERT_TRUE(listed.count(id)) << id << " was acknowledged and is gone";
    EXPECT_EQ(listed[id], "running") << id;
    EXPECT_EQ(s.Exec(id, "cat /tmp/mark | wc -l")["_status"], 200) << id;
  }
  // (a deleted sandbox may stay listed as stopped, never as running)
  for (const auto& id : acked_deleted)
    EXPECT_TRUE(!listed.count(id) || listed[id] == "stopped")
        << id << " came back after its delete: " << listed[id];
  // The host holds exactly what the server lists as running.
  std::set<std::string> running;
  for (const auto& [id, st] : listed)
    if (st == "running") running.insert(id);
  EXPECT_EQ(SandboxDirs(s), running);
  EXPECT_EQ(CgroupIdsOf(tag), running);
  for (const auto& id : ever)
    if (!running.count(id)) {
      EXPECT_TRUE(ProcsOf(id).empty()) << id << ": process left";
      EXPECT_TRUE(MountsOf(id).empty()) << id << ": mount left";
    }

  // Stopping the server then leaves nothing of any of them.
  int st = s.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_TRUE(CgroupIdsOf(tag).empty());
  for (const auto& id : ever) {
    EXPECT_TRUE(ProcsOf(id).empty()) << id;
    EXPECT_TRUE(MountsOf(id).empty()) << id;
  }
}
