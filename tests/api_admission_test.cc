// Admission by what the host really has (core/admission): sandboxes that
// really take their memory make hutchd refuse the next create with
// 503 capacity_exhausted (and Retry-After) before the host runs short,
// while those already running keep working; room comes back as they go.
//
// Safe on any CI host: hutchd is started with a reserve just under what
// the host has free now, so it refuses once the sandboxes have taken
// ~1.5 GB, and each sandbox is held to 512 MB by its cgroup; the loop
// stops after at most 10 sandboxes whatever the host does meanwhile.
// The other figures (memory PSI, tasks, open files) are shown with hutchd
// reading a directory shaped like /proc that the test writes (hidden flag
// --host-proc-root).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_server.h"

using hutch::testing::TestServer;
using nlohmann::json;

namespace {

int64_t MemAvailableMb() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit)
    if (name == "MemAvailable:") return kb / 1024;
  return 0;
}

constexpr int64_t kHogMb = 384;      // what each sandbox really takes
constexpr int64_t kBudgetMb = 1536;  // what the test lets them take in all
constexpr int kMaxSandboxes = 10;    // a bound whatever the host does meanwhile

// Starts a process in the sandbox that writes kHogMb of memory and holds
// it, and waits until it has (so the next create sees it in MemAvailable).
// Returns its pid, 0 on failure.
int Hog(TestServer& s, const std::string& id) {
  const std::string cmd = "python3 -c \"import time; b = b'x' * (" + std::to_string(kHogMb) +
                          " << 20); open('/tmp/held', 'w').write('1'); time.sleep(3600)\"";
  auto p = s.Client().Json("POST", "/v1/sandboxes/" + id + "/processes", {{"cmd", cmd}});
  if (p.status != 201) {
    ADD_FAILURE() << p.body;
    return 0;
  }
  for (int i = 0; i < 600; ++i) {
    if (s.Exec(id, "test -e /tmp/held")["exit_code"] == 0) return p.json()["pid"].get<int>();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the hog in " << id << " never held its memory";
  return 0;
}

}  // namespace

TEST(ApiAdmission, AMemoryHogSetIsRefusedWith503BeforeTheHostRunsOut) {
  const int64_t available = MemAvailableMb();
  ASSERT_GT(available, kBudgetMb + 1024) << "this host has too little free memory for the test";
  const int64_t reserve = available - kBudgetMb;
  // PSI off: only the reserve decides, whatever else runs on the host.
  TestServer s({"--memory-reserve-mb", std::to_string(reserve), "--memory-pressure-max", "0"});
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  std::vector<std::string> hogs;
  std::vector<int> pids;
  hutch::client::Response refused;
  for (int i = 0; i < kMaxSandboxes; ++i) {
    auto r = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 512}});
    if (r.status == 503) {
      refused = r;
      break;
    }
    ASSERT_EQ(r.status, 201) << r.body;
    hogs.push_back(r.json()["id"].get<std::string>());
    pids.push_back(Hog(s, hogs.back()));
    ASSERT_NE(pids.back(), 0);
  }
  std::cout << hogs.size() << " sandboxes of " << kHogMb << " MB admitted with " << available
            << " MB available and " << reserve << " MB kept free\n";
  // Some were admitted, and the refusal came well before the bound.
  EXPECT_GE(hogs.size(), 1u);
  ASSERT_EQ(refused.status, 503) << "no refusal after " << hogs.size() << " sandboxes";
  const json j = refused.json();
  EXPECT_EQ(j["code"], "capacity_exhausted");
  EXPECT_EQ(j["retryable"], true);
  EXPECT_NE(j["message"].get<std::string>().find("--memory-reserve-mb"), std::string::npos)
      << refused.body;
  EXPECT_FALSE(refused.header("retry-after").empty());
  // Nothing half-made, and the sandboxes that hold the memory still work.
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), hogs.size());
  for (size_t i = 0; i < hogs.size(); ++i) {
    auto p = c.Request("GET", "/v1/sandboxes/" + hogs[i] + "/processes/" + std::to_string(pids[i]));
    EXPECT_EQ(p.status, 200) << p.body;
    EXPECT_EQ(p.json()["running"], true) << p.body;
    EXPECT_EQ(s.Exec(hogs[i], "cat /tmp/held")["stdout"], "1");
  }
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);

  // Deleting them gives the memory back: creates are admitted again.
  for (const auto& id : hogs) EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  int status = 0;
  for (int i = 0; i < 200 && status != 201; ++i) {
    auto r = c.Json("POST", "/v1/sandboxes", {{"memory_mb", 512}});
    status = r.status;
    if (status != 201) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 201);
}

namespace {

// A /proc of an idle 24 GiB host, whose files the test then changes.
class FakeProc {
 public:
  FakeProc() {
    char tmpl[] = "/tmp/hutch-fake-proc-XXXXXX";
    if (mkdtemp(tmpl)) root_ = tmpl;
    Write("meminfo", "MemTotal: 24683664 kB\nMemAvailable: 22174164 kB\n");
    Psi(0);
    Tasks(200);
    Write("sys/kernel/pid_max", "32768\n");
    Write("sys/kernel/threads-max", "192724\n");
    Files(800);
    Write("sys/fs/file-max", "2466093\n");
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  const std::string& root() const { return root_; }
  void Psi(double full) {
    Write("pressure/memory", "some avg10=" + std::to_string(full) +
                                 " avg60=0.00 avg300=0.00 total=1\nfull avg10=" +
                                 std::to_string(full) + " avg60=0.00 avg300=0.00 total=1\n");
  }
  void Tasks(int n) { Write("loadavg", "0.10 0.10 0.10 1/" + std::to_string(n) + " 4242\n"); }
  void Files(int n) { Write("sys/fs/file-nr", std::to_string(n) + "\t0\t2466093\n"); }

 private:
  void Write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = root_ + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root_;
};

}  // namespace

TEST(ApiAdmission, MemoryPressureTasksAndOpenFilesNearTheirLimitsAreRefused) {
  FakeProc proc;
  TestServer s({"--host-proc-root", proc.root()});
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto create = [&] { return c.Json("POST", "/v1/sandboxes", json::object()); };
  auto expect_refused = [&](const std::string& names) {
    auto r = create();
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.json()["code"], "capacity_exhausted") << r.body;
    EXPECT_NE(r.body.find(names), std::string::npos) << r.body;
    EXPECT_FALSE(r.header("retry-after").empty());
  };
  auto a = create();
  ASSERT_EQ(a.status, 201) << a.body;
  proc.Psi(25);  // a quarter of the last 10 s with every task stalled on memory
  expect_refused("--memory-pressure-max");
  proc.Psi(0);
  proc.Tasks(32000);  // pid_max 32768, a tenth kept free
  expect_refused("task limit");
  proc.Tasks(200);
  proc.Files(2466093 - 1000);
  expect_refused("open-file limit");
  proc.Files(800);
  // Nothing was made by the refusals; room again once the figures are.
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), 1u);
  EXPECT_EQ(create().status, 201);
}
