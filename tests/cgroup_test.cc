// Tests of the per-sandbox cgroups against the real kernel. They need root
// (cgroupfs is root-owned) and skip otherwise. Every test removes the
// cgroups it made; the shared "hutch" parent directory stays, as it would
// for hutchd.
#include "driver/jail/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hutch::jail {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kMiB = 1024 * 1024;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ProcsContain(const std::string& dir, pid_t pid) {
  std::istringstream in(Slurp(dir + "/cgroup.procs"));
  long p;
  while (in >> p) {
    if (p == pid) return true;
  }
  return false;
}

// The first of `paths` that has `file` (v1 has one directory per
// controller).
std::string DirWith(const std::vector<std::string>& paths, const std::string& file) {
  for (const std::string& p : paths) {
    if (::access((p + "/" + file).c_str(), F_OK) == 0) return p;
  }
  return "";
}

// A forked child that waits for one byte on a pipe before running `body`
// (so it can be moved into a cgroup first), and is SIGKILLed and reaped
// when the test ends however it ends.
class Child {
 public:
  template <typename F>
  explicit Child(F body) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[1]);
      char c;
      ssize_t n;
      do {
        n = ::read(fds[0], &c, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1) ::_exit(99);  // the test closed the pipe: just leave
      ::_exit(body());
    }
    ::close(fds[0]);
    go_ = fds[1];
  }
  ~Child() {
    if (go_ >= 0) ::close(go_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      (void)Wait();
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void Start() {
    char c = 'g';
    ASSERT_EQ(::write(go_, &c, 1), 1);
  }
  // The raw wait status.
  int Wait() {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return st;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  bool reaped_ = false;
};

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to write cgroupfs";
    auto m = CgroupManager::Detect();
    ASSERT_TRUE(m.ok()) << m.error().message;
    mgr_ = std::move(m.value());
  }
  void TearDown() override {
    if (!mgr_) return;
    // Nothing of ours may be left behind.
    for (const std::string& n : mgr_->ListExisting()) {
      EXPECT_NE(n.rfind(Prefix(), 0), 0u) << "leftover cgroup " << n;
      if (n.rfind(Prefix(), 0) == 0) (void)mgr_->RemoveExisting(n);
    }
  }

  static std::string Prefix() { return "test-" + std::to_string(::getpid()) + "-"; }
  std::string Name(const std::string& what) { return Prefix() + what; }

  std::unique_ptr<Cgroup> Make(const std::string& what, const CgroupLimits& l) {
    auto cg = mgr_->Create(Name(what), l);
    EXPECT_TRUE(cg.ok()) << cg.error().message;
    if (!cg.ok()) return nullptr;
    return std::move(cg.value());
  }

  std::unique_ptr<CgroupManager> mgr_;
};

TEST_F(CgroupTest, CreateAddProcessLimitsAndStats) {
  auto cg = Make("basic", CgroupLimits{64 * kMiB, 10, 0.5});
  ASSERT_TRUE(cg);
  Child child([] { return 0; });
  ASSERT_GT(child.pid(), 0);
  auto s = cg->AddProcess(child.pid());
  ASSERT_TRUE(s.ok()) << s.error().message;

  const auto paths = cg->Paths();
  ASSERT_FALSE(paths.empty());
  for (const std::string& p : paths) {
    EXPECT_TRUE(IsDir(p)) << p;
    EXPECT_NE(p.find("/hutch/" + Name("basic")), std::string::npos) << p;
    EXPECT_TRUE(ProcsContain(p, child.pid())) << p;
  }

  if (mgr_->Version() == 1) {
    const std::string mem = DirWith(paths, "memory.limit_in_bytes");
    ASSERT_FALSE(mem.empty());
    EXPECT_EQ(std::stoll(Slurp(mem + "/memory.limit_in_bytes")), 64 * kMiB);
    if (::access((mem + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0) {
      EXPECT_EQ(std::stoll(Slurp(mem + "/memory.memsw.limit_in_bytes")), 64 * kMiB);
    }
    EXPECT_EQ(std::stoll(Slurp(DirWith(paths, "pids.max") + "/pids.max")), 10);
    const std::string cpu = DirWith(paths, "cpu.cfs_quota_us");
    if (!cpu.empty()) {
      EXPECT_EQ(std::stoll(Slurp(cpu + "/cpu.cfs_quota_us")), 50000);
    }
  } else {
    EXPECT_EQ(std::stoll(Slurp(paths[0] + "/memory.max")), 64 * kMiB);
    EXPECT_EQ(std::stoll(Slurp(paths[0] + "/pids.max")), 10);
  }

  auto st = cg->Stats();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GE(st->pids_current, 1u);
  EXPECT_LE(st->pids_current, 10u);
  EXPECT_EQ(st->oom_kills, 0u);
  EXPECT_EQ(cg->OomKills(), 0u);

  child.Start();
  const int ws = child.Wait();
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  EXPECT_TRUE(cg->Remove().ok());  // idempotent
}

TEST_F(CgroupTest, RejectsBadAndDuplicateNames) {
  for (const char* bad : {"", ".", "..", "../x", "a/b", ".hidden", "sp ace"}) {
    auto r = mgr_->Create(bad, {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidRequest) << bad;
  }
  auto cg = Make("dup", {});
  ASSERT_TRUE(cg);
  auto again = mgr_->Create(Name("dup"), {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Code::kConflict);
  // The failed Create must not have removed the existing one.
  for (const std::string& p : cg->Paths()) EXPECT_TRUE(IsDir(p)) << p;
}

TEST_F(CgroupTest, MemoryLimitOomKills) {
  auto cg = Make("oom", CgroupLimits{64 * kMiB, 0, 0});
  ASSERT_TRUE(cg);
  Child child([] {
    // Touch every page: untouched malloc'd memory is never charged.
    const size_t size = 200 * kMiB;
    // volatile: at -O2 the compiler may drop stores to memory that is
    // never read again, and the test would prove nothing.
    volatile char* p = static_cast<volatile char*>(std::malloc(size));
    if (p == nullptr) return 2;
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    return 0;  // survived: the limit did not hold
  });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  const uint64_t before = cg->OomKills();
  child.Start();
  const int ws = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(ws)) << "exit status " << (WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
  EXPECT_EQ(WTERMSIG(ws), SIGKILL);
  EXPECT_GT(cg->OomKills(), before);
  auto st = cg->Stats();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GE(st->oom_kills, 1u);
  if (mgr_->Version() == 1) {
    // memory.max_usage_in_bytes: the peak sat at the limit.
    EXPECT_GE(st->memory_peak, static_cast<uint64_t>(32 * kMiB));
    EXPECT_LE(st->memory_peak, static_cast<uint64_t>(64 * kMiB));
  }
  EXPECT_TRUE(cg->Remove().ok());
}

TEST_F(CgroupTest, PidsLimitStopsForks) {
  auto cg = Make("pids", CgroupLimits{0, 5, 0});
  ASSERT_TRUE(cg);
  // Exit codes: 0 = a fork failed with EAGAIN, 1 = all 20 forks worked,
  // 2 = a fork failed otherwise. The grandchildren sleep until Remove().
  Child child([] {
    for (int i = 0; i < 20; ++i) {
      pid_t p = ::fork();
      if (p == 0) {
        for (;;) ::pause();
      }
      if (p < 0) return errno == EAGAIN ? 0 : 2;
    }
    return 1;
  });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  child.Start();
  const int ws = child.Wait();
  ASSERT_TRUE(WIFEXITED(ws));
  EXPECT_EQ(WEXITSTATUS(ws), 0);
  auto st = cg->Stats();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GE(st->pids_current, 1u);  // the orphaned grandchildren
  EXPECT_LE(st->pids_current, 5u);
  auto s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : cg->Paths()) EXPECT_FALSE(IsDir(p)) << p;
}

// A child that counts in shared memory as fast as it can.
struct Counter {
  Counter() {
    void* m = ::mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) n = new (m) std::atomic<uint64_t>(0);
  }
  ~Counter() {
    if (n != nullptr) ::munmap(n, sizeof(*n));
  }
  std::atomic<uint64_t>* n = nullptr;
};

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

bool ReportsFrozen(const CgroupManager& mgr, const std::vector<std::string>& paths) {
  if (mgr.Version() == 1) {
    const std::string d = DirWith(paths, "freezer.state");
    return !d.empty() && Slurp(d + "/freezer.state").rfind("FROZEN", 0) == 0;
  }
  return Slurp(paths[0] + "/cgroup.events").find("frozen 1") != std::string::npos;
}

TEST_F(CgroupTest, FreezeStopsAndThawResumes) {
  Counter c;
  ASSERT_NE(c.n, nullptr);
  auto cg = Make("freeze", {});
  ASSERT_TRUE(cg);
  std::atomic<uint64_t>* n = c.n;
  Child child([n] {
    for (;;) n->fetch_add(1, std::memory_order_relaxed);
    return 0;
  });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  child.Start();
  ASSERT_TRUE(WaitFor([n] { return n->load() > 0; }, 2000ms));

  auto s = cg->Freeze();
  if (!s.ok() && s.error().code == Code::kNotSupported) GTEST_SKIP() << s.error().message;
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(ReportsFrozen(*mgr_, cg->Paths()));
  const uint64_t frozen_at = n->load();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(n->load(), frozen_at) << "a frozen task kept running";

  s = cg->Thaw();
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(ReportsFrozen(*mgr_, cg->Paths()));
  EXPECT_TRUE(WaitFor([&] { return n->load() > frozen_at; }, 2000ms))
      << "thawed task did not resume";

  s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

TEST_F(CgroupTest, RemoveKillsLiveProcess) {
  auto cg = Make("remove", CgroupLimits{64 * kMiB, 10, 1});
  ASSERT_TRUE(cg);
  Child child([] { return 0; });  // blocks on the pipe until killed
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  const auto paths = cg->Paths();
  auto s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

TEST_F(CgroupTest, RemoveKillsFrozenProcess) {
  auto cg = Make("remove-frozen", {});
  ASSERT_TRUE(cg);
  Child child([] { return 0; });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  auto s = cg->Freeze();
  if (!s.ok() && s.error().code == Code::kNotSupported) GTEST_SKIP() << s.error().message;
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto paths = cg->Paths();
  s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

TEST_F(CgroupTest, RemoveKillsForkBomb) {
  auto cg = Make("forkbomb", CgroupLimits{0, 32, 0});
  ASSERT_TRUE(cg);
  Child child([] {
    for (;;) {
      if (::fork() < 0) std::this_thread::yield();
    }
    return 0;
  });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  child.Start();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto st = cg->Stats();
        return st.ok() && st->pids_current >= 16;
      },
      2000ms));
  const auto paths = cg->Paths();
  auto s = cg->Remove();
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

TEST_F(CgroupTest, DestructorRemoves) {
  std::vector<std::string> paths;
  Child child([] { return 0; });
  {
    auto cg = Make("dtor", {});
    ASSERT_TRUE(cg);
    ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
    paths = cg->Paths();
  }
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

TEST_F(CgroupTest, ListAndRemoveExisting) {
  auto cg = Make("leftover", CgroupLimits{64 * kMiB, 10, 0});
  ASSERT_TRUE(cg);
  Child child([] { return 0; });
  ASSERT_TRUE(cg->AddProcess(child.pid()).ok());
  const auto paths = cg->Paths();

  auto names = mgr_->ListExisting();
  EXPECT_NE(std::find(names.begin(), names.end(), Name("leftover")), names.end());

  // As at hutchd's start: the cgroup of an earlier run, known by name only.
  auto s = mgr_->RemoveExisting(Name("leftover"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const std::string& p : paths) EXPECT_FALSE(IsDir(p)) << p;
  names = mgr_->ListExisting();
  EXPECT_EQ(std::find(names.begin(), names.end(), Name("leftover")), names.end());
  const int ws = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);

  EXPECT_TRUE(mgr_->RemoveExisting(Name("leftover")).ok());  // already gone: fine
  EXPECT_TRUE(cg->Remove().ok());                            // and for the owner too
}

}  // namespace
}  // namespace hutch::jail
