// The shared lifecycle checks with driver=vm (issue 9): create, exec,
// stream, files, timeout, cancel, delete, TTL, pause/resume, and crash
// recovery — hutchd killed with SIGKILL adopts the running VMs on restart,
// and a VM whose create was never acknowledged is killed (by the pid
// hutchd recorded, never by name). Label slow: each boot is ~1.5 s of TCG.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::client::SseEvent;
using hutch::testing::TestServer;
using namespace hutch::testing::vm;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string CreateVm(TestServer& s, json body = json::object()) {
  body["driver"] = "vm";
  if (!body.contains("memory_mb")) body["memory_mb"] = 256;
  if (!body.contains("disk_mb")) body["disk_mb"] = 256;
  auto r = s.Client().Json("POST", "/v1/sandboxes", body);
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? r.json()["id"].get<std::string>() : "";
}

std::string Status(TestServer& s, const std::string& id) {
  auto r = s.Client().Request("GET", "/v1/sandboxes/" + id);
  return r.status == 200 ? r.json()["status"].get<std::string>()
                         : "http " + std::to_string(r.status);
}

}  // namespace

TEST(VmLifecycle, ExecStreamFilesTimeoutCancelDelete) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string id = CreateVm(s);
  ASSERT_FALSE(id.empty());
  auto c = s.Client();

  // Exec: env, cwd, stdin, exit codes.
  auto r = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                  {{"cmd", "echo $FOO; pwd; cat"},
                   {"env", {{"FOO", "bar"}}},
                   {"cwd", "/tmp"},
                   {"stdin", "in\n"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["stdout"], "bar\n/tmp\nin\n");

  // Stream: events in order, ending with exit.
  std::vector<std::string> names;
  std::string out;
  auto sr = c.Sse("/v1/sandboxes/" + id + "/exec/stream",
                  {{"cmd", "for i in 1 2 3; do echo $i; done"}}, [&](const SseEvent& e) {
                    names.push_back(e.event);
                    if (e.event == "stdout") out += json::parse(e.data).value("text", "");
                    return true;
                  });
  EXPECT_EQ(sr.status, 200);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "start");
  EXPECT_EQ(names.back(), "exit");
  EXPECT_EQ(out, "1\n2\n3\n");

  // Files: a 3 MB upload and download round trip, listing.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  auto up = c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/home/user/big.bin", big,
                      {{"Content-Type", "application/octet-stream"}});
  EXPECT_EQ(up.status, 201) << up.body;
  auto down = c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/home/user/big.bin");
  EXPECT_EQ(down.status, 200);
  EXPECT_TRUE(down.body == big) << "download differs (" << down.body.size() << " bytes)";

  // Per-exec timeout kills the command.
  auto t = c.Json("POST", "/v1/sandboxes/" + id + "/exec",
                  {{"cmd", "sleep 100"}, {"timeout_seconds", 2}});
  EXPECT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.json()["timed_out"], true) << t.body;

  // Cancel: a stream the client walks away from kills its command.
  bool saw = false;
  c.Sse("/v1/sandboxes/" + id + "/exec/stream", {{"cmd", "echo started; exec sleep 300"}},
        [&](const SseEvent& e) {
          if (e.event == "stdout") saw = true;
          return !saw;
        });
  EXPECT_TRUE(saw);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = s.Exec(id, "pgrep -x sleep >/dev/null || echo none")["stdout"] == "none\n";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "closing the stream left the command running";

  // Pause (QMP stop) and resume (cont).
  EXPECT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/pause").status, 200);
  EXPECT_EQ(Status(s, id), "paused");
  EXPECT_EQ(c.Request("POST", "/v1/sandboxes/" + id + "/resume").status, 200);
  EXPECT_EQ(s.Exec(id, "echo awake")["stdout"], "awake\n");

  // Stats come from QEMU's cgroup.
  auto m = c.Request("GET", "/v1/sandboxes/" + id + "/metrics");
  EXPECT_EQ(m.status, 200) << m.body;

  const pid_t qemu = QemuPid(s, id);
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_TRUE(QemuGone(qemu));
  EXPECT_EQ(s.Stop(), 0);
}

TEST(VmLifecycle, TtlExpiryStopsTheVm) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string id = CreateVm(s, {{"ttl_seconds", 3}});
  ASSERT_FALSE(id.empty());
  const pid_t qemu = QemuPid(s, id);
  ASSERT_TRUE(IsQemu(qemu));
  std::string st;
  for (int i = 0; i < 200 && (st = Status(s, id)) == "running"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(st, "stopped");
  EXPECT_TRUE(QemuGone(qemu));
  EXPECT_EQ(s.Stop(), 0);
}

TEST(VmLifecycle, Kill9RestartAdoptsVmsAndLeavesNoOrphanQemu) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string a = CreateVm(s), b = CreateVm(s);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(s.Exec(a, "echo kept > /tmp/k; sleep 1000 >/dev/null 2>&1 &")["exit_code"], 0);
  EXPECT_EQ(s.Client().Request("POST", "/v1/sandboxes/" + b + "/pause").status, 200);
  const pid_t qa = QemuPid(s, a), qb = QemuPid(s, b);

  // A create cut by the crash: its QEMU runs, but nobody acknowledged it.
  std::thread creating([&] {
    try {
      s.Client().Json("POST", "/v1/sandboxes", {{"driver", "vm"}, {"memory_mb", 256}});
    } catch (const std::exception&) {
      // The server dies under it: that is the point.
    }
  });
  pid_t qc = -1;
  for (int i = 0; i < 200 && qc < 0; ++i) {
    std::error_code ec;
    for (auto& e : fs::directory_iterator(s.state_dir() + "/state/vm/pids", ec)) {
      const std::string id = e.path().filename();
      if (id != a && id != b) qc = QemuPid(s, id);
    }
    if (qc < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  s.Kill9();
  creating.join();
  ASSERT_GT(qc, 0) << "the third create never started QEMU";
  EXPECT_TRUE(IsQemu(qa) && IsQemu(qb)) << "VMs must outlive hutchd";

  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(QemuGone(qc)) << "the unacknowledged create's QEMU " << qc << " is an orphan";
  EXPECT_EQ(Status(s, a), "running");
  EXPECT_EQ(Status(s, b), "paused");
  EXPECT_EQ(s.Exec(a, "cat /tmp/k; pgrep -x sleep >/dev/null && echo proc")["stdout"],
            "kept\nproc\n");
  EXPECT_EQ(s.Client().Request("POST", "/v1/sandboxes/" + b + "/resume").status, 200);
  EXPECT_EQ(s.Exec(b, "echo b")["stdout"], "b\n");

  // A clean stop destroys every VM.
  EXPECT_EQ(s.Stop(), 0);
  EXPECT_TRUE(QemuGone(qa));
  EXPECT_TRUE(QemuGone(qb));
}
