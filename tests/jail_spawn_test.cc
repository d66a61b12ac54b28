// The jail's isolation pipeline on its own (driver/jail/jail_spawn), driven
// step by step as the jail driver does, without a server around it.
//
// The child of SpawnJail is a raw clone (sharing memory until its exec)
// made by one thread of a process that has other threads (netns work, the network manager's
// worker): anything it calls between clone and exec must not need a lock another thread may have
// held at that moment. glibc's set*id wrappers take the lock of its thread list, which every thread
// start and exit takes too; a child cloned while that lock was held hung forever in setresgid, and
// the sandbox's create failed after 15 s with "sandbox exec timed out".
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/blocking_worker.h"
#include "common/ext4_image.h"
#include "driver/jail/cgroup.h"
#include "driver/jail/cgroup_v1.h"
#include "driver/jail/disk_pool.h"
#include "driver/jail/jail_spawn.h"
#include "driver/jail/seccomp_policy.h"

namespace fs = std::filesystem;
using namespace hutch;
using namespace hutch::jail;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The agent binary in a memfd, as the jail driver hands it to the child.
UniqueFd AgentMemfd() {
  UniqueFd src(open(Env("HUTCH_AGENT_BIN").c_str(), O_RDONLY | O_CLOEXEC));
  if (!src) return {};
  struct stat st;
  if (fstat(src.get(), &st) != 0) return {};
  UniqueFd mfd(memfd_create("hutch-agent", MFD_CLOEXEC));
  off_t off = 0;
  while (mfd && off < st.st_size) {
    if (sendfile(mfd.get(), src.get(), &off, static_cast<size_t>(st.st_size - off)) <= 0) return {};
  }
  if (mfd && fchmod(mfd.get(), 0555) != 0) return {};
  return mfd;
}

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

class JailSpawn : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    std::string base = Env("HUTCH_TEMPLATES_DIR") + "/base";
    rootfs_ = base + "/rootfs";
    // On a fresh clone nothing has built the base template yet (hutchd does
    // on its first start): build it as hutchd would. The builder takes a
    // lock, so a server starting next to this test waits for the same build.
    if (!fs::exists(base + "/template.json")) {
      std::string cmd = "bash '" + Env("HUTCH_SOURCE_DIR") + "/scripts/build-base-template' '" +
                        base + "' 1000000 >/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    ASSERT_TRUE(fs::exists(rootfs_ + "/bin")) << rootfs_;
    agent_ = AgentMemfd();
    ASSERT_TRUE(agent_) << "HUTCH_AGENT_BIN=" << Env("HUTCH_AGENT_BIN");
    auto sc = SeccompPolicy::Build();
    ASSERT_TRUE(sc.ok()) << sc.error().message;
    seccomp_ = std::make_unique<SeccompPolicy>(std::move(sc).value());
    char tmpl[] = "/tmp/hutch-jail-spawn-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // One sandbox from clone to exec'd agent; then killed. Returns what went
  // wrong, or "" when the agent was exec'd (and `after_exec`, if given,
  // found nothing wrong with the running child). With `tasks_fds` the
  // child moves itself into a cgroup (Cgroup::OpenSelfAttach) and skips
  // the gate; without, nobody moves it and the gate is passed as is.
  std::string SpawnOnce(int i, const std::vector<int>& tasks_fds = {},
                        const std::function<std::string(pid_t)>& after_exec = nullptr) {
    const std::string d = dir_ + "/" + std::to_string(i);
    fs::create_directories(d + "/root");
    fs::create_directories(d + "/scratch");
    JailConfig cfg;
    cfg.sandbox_dir = d;
    cfg.lower_dir = rootfs_;
    cfg.agent_socket = d + "/agent.sock";
    cfg.log_path = d + "/agent.log";
    cfg.uid_base = 1000000;
    // The sandbox's disk, as the jail driver makes it (without its pool).
    const std::string image = d + "/disk.img";
    const std::string mkfs = "truncate -s 16M '" + image +
                             "' && /sbin/mkfs.ext4 -q -F -O ^has_journal -E lazy_itable_init=1 '" +
                             image + "'";
    if (std::system(mkfs.c_str()) != 0) return "mkfs failed: " + mkfs;
    auto disk = PrepareWritableLayer(image, cfg.uid_base);
    if (!disk.ok()) return "disk: " + disk.error().message;
    cfg.disk_mount_fd = disk->mount.get();
    cfg.seccomp = seccomp_.get();
    cfg.agent_memfd = agent_.get();
    cfg.cgroup_tasks_fds = tasks_fds;
    std::optional<Result<JailChild>> child;
    boost::asio::io_context io;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> { child.emplace(co_await SpawnJail(cfg, spawner_)); },
        boost::asio::detached);
    io.run();
    if (!child || !child->ok()) return "spawn: " + (child ? child->error().message : "no answer");
    JailChild& ch = **child;
    std::string what;
    const bool gate = tasks_fds.empty();
    if (gate && !Readable(ch.sync_fd(), 10000)) {
      what = "no cgroup gate within 10 s of the start";
    } else if (auto passed = gate ? ch.ReadCgroupGate() : Status{}; !passed.ok()) {
      what = passed.error().message;
    } else if (auto go = gate ? ch.ReleaseIntoCgroupNamespace() : Status{}; !go.ok()) {
      what = go.error().message;
    } else if (!Readable(ch.sync_fd(), 10000)) {
      what = "no report within 10 s of release";
    } else if (auto asked = ch.ReadReport(); !asked.ok()) {
      what = asked.error().message;
    } else if (auto mapped = ch.MapIdsAndRelease(cfg.uid_base, 65536); !mapped.ok()) {
      what = mapped.error().message;
    } else if (!Readable(ch.sync_fd(), 10000)) {
      what = "the child did not reach exec within 10 s of its id maps (stuck after clone)";
    } else if (auto ex = ch.ReadExecResult(); !ex.ok()) {
      what = ex.error().message;
    } else if (after_exec) {
      what = after_exec(ch.pid());
    }
    ch.KillAndReap();
    return what;
  }

  std::string rootfs_, dir_;
  BlockingWorker spawner_{4};
  UniqueFd agent_;
  std::unique_ptr<SeccompPolicy> seccomp_;
};

TEST_F(JailSpawn, ReachesExecWhileOtherThreadsStartAndEnd) {
  // Another thread starts and joins threads as fast as it can, as hutchd's
  // netns and worker threads do under a burst of network creates. Before
  // the child used raw set*id syscalls, about one spawn in six hung here.
  std::atomic<bool> stop{false};
  std::atomic<long> started{0};
  std::thread churn([&] {
    while (!stop) {
      std::thread t([] {});
      t.join();
      ++started;
    }
  });
  int failed = 0;
  std::string first;
  for (int i = 0; i < 40 && failed < 3; ++i) {
    std::string what = SpawnOnce(i);
    if (!what.empty()) {
      ++failed;
      if (first.empty()) first = "spawn " + std::to_string(i) + ": " + what;
    }
  }
  stop = true;
  churn.join();
  EXPECT_EQ(failed, 0) << first;
  EXPECT_GT(started.load(), 0);
}

// On cgroup v1 the child writes "0" into each hierarchy's `tasks`
// through files the parent opened: it must end up in every controller of
// its cgroup, and no longer in hutchd's.
TEST_F(JailSpawn, MovesItselfIntoItsCgroupsThroughTheFilesItIsGiven) {
  auto mgr = CgroupManager::Detect();
  ASSERT_TRUE(mgr.ok()) << mgr.error().message;
  const std::string name = "jail-spawn-test-" + std::to_string(getpid());
  auto cg = (*mgr)->Create(name, CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message;
  auto files = (*cg)->OpenSelfAttach();
  ASSERT_TRUE(files.ok()) << files.error().message;
  if (files->empty()) {
    (*cg)->Remove().ok();
    GTEST_SKIP() << "cgroup v2: the parent moves the child (AddProcess)";
  }
  std::vector<int> fds;
  for (const UniqueFd& f : *files) fds.push_back(f.get());
  const std::vector<std::string> dirs = (*cg)->Paths();
  ASSERT_EQ(fds.size(), dirs.size());
  std::vector<std::string> missing;
  std::string what = SpawnOnce(0, fds, [&](pid_t pid) {
    for (const std::string& d : dirs) {
      auto procs = cgfs::ReadProcs(d);
      if (!procs.ok()) return "read " + d + ": " + procs.error().message;
      if (std::find(procs->begin(), procs->end(), pid) == procs->end()) missing.push_back(d);
    }
    return std::string();
  });
  EXPECT_EQ(what, "");
  EXPECT_TRUE(missing.empty()) << "the agent is not in " << missing.front();
  EXPECT_TRUE((*cg)->Remove().ok());
}

}  // namespace
