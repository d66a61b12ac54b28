// cgroup v2: one directory per sandbox in a subtree delegated to hutchd.
//
// Layout under hutchd's own cgroup <own> (from the "0::" line of
// /proc/self/cgroup):
//   <own>/hutchd        hutchd itself (all its threads)
//   <own>/hutch/<name>  one per sandbox
// The v2 "no internal processes" rule (cgroup-v2.rst) forbids a non-root
// cgroup that has processes from enabling controllers in
// cgroup.subtree_control (EBUSY), so hutchd first moves itself out of <own>.
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <sstream>

#include "driver/jail/cgroup_v1.h"  // cgfs helpers
#include "driver/jail/cgroup_v2.h"

namespace hutch::jail {
namespace {

using cgfs::Clock;

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::string dir, bool has_cpu) : dir_(std::move(dir)), has_cpu_(has_cpu) {}
  ~CgroupV2() override {
    if (!removed_) (void)Remove();
  }
  CgroupV2(const CgroupV2&) = delete;
  CgroupV2& operator=(const CgroupV2&) = delete;

  Status SetLimits(const CgroupLimits& l) {
    if (l.memory_bytes > 0) {
      HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/memory.max", std::to_string(l.memory_bytes)),
                     "memory limit");
    }
    // Swap is never allowed. memory.swap.max is absent when the kernel has
    // no swap accounting (CONFIG_SWAP off or swapaccount=0).
    if (cgfs::Exists(dir_ + "/memory.swap.max")) {
      HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/memory.swap.max", "0"), "swap limit");
    }
    if (l.pids_max > 0) {
      HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/pids.max", std::to_string(l.pids_max)), "pids limit");
    }
    if (l.cpus > 0 && has_cpu_) {
      // "quota period" in µs; the kernel rejects quotas under 1 ms.
      const int64_t quota = std::max<int64_t>(1000, std::llround(l.cpus * cgfs::kCpuPeriodUs));
      HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/cpu.max", std::to_string(quota) + " " +
                                                            std::to_string(cgfs::kCpuPeriodUs)),
                     "cpu limit");
    }
    return {};
  }

  Status AddProcess(pid_t pid) override {
    auto s = cgfs::WriteFile(dir_ + "/cgroup.procs", std::to_string(pid));
    if (!s.ok()) {
      Error e = s.error().Context("add pid " + std::to_string(pid));
      if (e.err == ESRCH) e.code = Code::kProcessNotFound;
      return e;
    }
    return {};
  }

  Result<CgroupStats> Stats() override {
    CgroupStats st;
    auto cur = cgfs::ReadUint(dir_ + "/memory.current");
    if (!cur.ok()) return cur.error().Context("stats");
    st.memory_current = *cur;
    // memory.peak exists since Linux 5.19.
    auto peak = cgfs::ReadUint(dir_ + "/memory.peak");
    if (peak.ok()) st.memory_peak = *peak;
    st.oom_kills = OomKills();
    auto pids = cgfs::ReadUint(dir_ + "/pids.current");
    if (!pids.ok()) return pids.error().Context("stats");
    st.pids_current = *pids;
    // cpu.stat's usage_usec is there even without the cpu controller.
    auto usec = cgfs::ReadKeyed(dir_ + "/cpu.stat", "usage_usec");
    if (usec.ok()) st.cpu_usage_ns = *usec * 1000;
    return st;
  }

  uint64_t DirtyBytes() override {
    auto n = cgfs::ReadKeyed(dir_ + "/memory.stat", "file_dirty");
    return n.ok() ? *n : 0;
  }

  uint64_t OomKills() override {
    auto n = cgfs::ReadKeyed(dir_ + "/memory.events", "oom_kill");
    return n.ok() ? *n : 0;
  }

  Status Freeze() override {
    HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/cgroup.freeze", "1"), "freeze");
    if (WaitFrozen(std::chrono::milliseconds(1000))) return {};
    (void)Thaw();
    return MakeError(Code::kUnavailable, "freeze: " + dir_ + " did not report frozen in 1 s");
  }

  Status Thaw() override {
    HUTCH_CHECK_OK(cgfs::WriteFile(dir_ + "/cgroup.freeze", "0"), "thaw");
    return {};
  }

  void KillAll() override {
    // Thaw first. A v2-frozen task does wake for a fatal signal, but the
    // fallback below must not leave the sandbox frozen, and thawing an
    // unfrozen cgroup is free.
    (void)cgfs::WriteFile(dir_ + "/cgroup.freeze", "0");
    // cgroup.kill (Linux 5.14) SIGKILLs the whole cgroup atomically with
    // respect to fork, so no pid can be missed or reused.
    bool killed = cgfs::WriteFile(dir_ + "/cgroup.kill", "1").ok();
    const auto deadline = Clock::now() + cgfs::kRetryBudget;
    for (;;) {
      auto pids = cgfs::ReadProcs(dir_);
      if (!pids.ok() || pids->empty()) return;
      // Older kernels (or tasks that slipped in): kill pid by pid until
      // the list drains. After cgroup.kill the list just needs time.
      if (!killed) {
        for (pid_t p : *pids) ::kill(p, SIGKILL);
      }
      killed = false;
      if (Clock::now() >= deadline) return;
      cgfs::SleepMs(5);
    }
  }

  Status Remove() override {
    if (removed_) return {};
    KillAll();
    auto s = cgfs::RemoveDir(dir_, Clock::now() + cgfs::kRetryBudget);
    if (!s.ok()) return s.error().Context("remove cgroup");
    removed_ = true;
    return {};
  }

  std::vector<std::string> Paths() const override { return {dir_}; }
  // cgroup.threads would need a threaded subtree; a v2 host attaches the
  // sandbox with AddProcess.
  Result<std::vector<UniqueFd>> OpenSelfAttach() override { return std::vector<UniqueFd>{}; }

 private:
  // cgroup.events has "frozen 1" once every task is frozen.
  bool WaitFrozen(std::chrono::milliseconds budget) {
    const auto deadline = Clock::now() + budget;
    for (;;) {
      auto f = cgfs::ReadKeyed(dir_ + "/cgroup.events", "frozen");
      if (f.ok() && *f == 1) return true;
      if (!f.ok() || Clock::now() >= deadline) return false;
      cgfs::SleepMs(1);
    }
  }

  std::string dir_;
  bool has_cpu_;
  bool removed_ = false;
};

class ManagerV2 final : public CgroupManager {
 public:
  ManagerV2(std::string parent, bool has_cpu) : parent_(std::move(parent)), has_cpu_(has_cpu) {}
  int Version() const override { return 2; }

  Result<std::unique_ptr<Cgroup>> Create(const std::string& name,
                                         const CgroupLimits& limits) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    const std::string p = parent_ + "/" + name;
    if (::mkdir(p.c_str(), 0755) != 0) {
      const int err = errno;
      Error e = ErrnoError("cgroup: mkdir " + p, err);
      if (err == EEXIST) e.code = Code::kConflict;
      return e;
    }
    auto cg = std::make_unique<CgroupV2>(p, has_cpu_);
    auto s = cg->SetLimits(limits);
    if (!s.ok()) return s.error().Context("cgroup " + name);  // cg's destructor removes the dir
    return std::unique_ptr<Cgroup>(std::move(cg));
  }

  std::vector<std::string> ListExisting() override { return cgfs::ListChildDirs(parent_); }

  Status RemoveExisting(const std::string& name) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    CgroupV2 cg(parent_ + "/" + name, has_cpu_);
    return cg.Remove();  // a missing directory counts as removed
  }

  Result<std::unique_ptr<Cgroup>> Open(const std::string& name) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    std::string d = parent_ + "/" + name;
    if (access(d.c_str(), F_OK) != 0) return MakeError(Code::kNotFound, "cgroup " + d + " is gone");
    return std::unique_ptr<Cgroup>(new CgroupV2(d, has_cpu_));
  }

 private:
  std::string parent_;
  bool has_cpu_;
};

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool HasWord(const std::string& s, const std::string& w) {
  std::istringstream in(s);
  std::string t;
  while (in >> t) {
    if (t == w) return true;
  }
  return false;
}

// Enables memory and pids (required) and cpu (when available) for the
// children of `dir`. Each controller is written on its own: one write of
// "+memory +pids +cpu" fails as a whole if any one is refused.
Result<bool> EnableControllers(const std::string& dir) {
  auto avail = cgfs::ReadFile(dir + "/cgroup.controllers");
  if (!avail.ok()) return avail.error();
  for (const char* c : {"memory", "pids"}) {
    if (!HasWord(*avail, c)) {
      return MakeError(Code::kUnavailable, std::string("the ") + c +
                                               " controller is not delegated to " + dir +
                                               " (cgroup.controllers: " + Trim(*avail) + ")");
    }
    auto s = cgfs::WriteFile(dir + "/cgroup.subtree_control", std::string("+") + c);
    if (!s.ok()) {
      Error e = s.error();
      if (e.err == EBUSY) e.message += " (other processes still live in " + dir + ")";
      return e;
    }
  }
  const bool cpu =
      HasWord(*avail, "cpu") && cgfs::WriteFile(dir + "/cgroup.subtree_control", "+cpu").ok();
  return cpu;
}

}  // namespace

Result<std::unique_ptr<CgroupManager>> DetectV2() {
  auto self = cgfs::ReadFile("/proc/self/cgroup");
  if (!self.ok()) return self.error().Context("cgroup v2");
  std::string own;
  {
    std::istringstream in(*self);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0::", 0) == 0) own = line.substr(3);
    }
  }
  // A path outside our cgroup namespace shows as "/../x": not usable.
  if (own.empty() || own[0] != '/' || own.find("/..") != std::string::npos) {
    return MakeError(Code::kUnavailable, "cgroup v2: cannot place own cgroup '" + own + "'");
  }
  auto mounts = cgfs::ReadMountInfo();
  if (!mounts.ok()) return mounts.error().Context("cgroup v2");
  std::string own_dir;
  for (const cgfs::MountEntry& m : *mounts) {
    if (m.fstype == "cgroup2" && m.mount_point == "/sys/fs/cgroup")
      own_dir = cgfs::DirUnderMount(m, own);
  }
  if (own_dir.empty()) {
    return MakeError(Code::kUnavailable,
                     "cgroup v2: own cgroup " + own + " is not under /sys/fs/cgroup");
  }

  // Already moved (Detect ran before in this process): <own> is our leaf.
  std::string base = own_dir;
  const std::string leaf_name = "/hutchd";
  if (base.size() > leaf_name.size() &&
      base.compare(base.size() - leaf_name.size(), leaf_name.size(), leaf_name) == 0) {
    base.resize(base.size() - leaf_name.size());
  } else {
    auto s = cgfs::MakeDir(base + leaf_name);
    if (!s.ok()) return s.error().Context("cgroup v2: leaf for hutchd");
    // Writing our pid to cgroup.procs moves every thread of the process.
    s = cgfs::WriteFile(base + leaf_name + "/cgroup.procs", std::to_string(::getpid()));
    if (!s.ok()) return s.error().Context("cgroup v2: move hutchd to its leaf");
  }
  auto cpu = EnableControllers(base);
  if (!cpu.ok()) return cpu.error().Context("cgroup v2: enable controllers");
  const std::string parent = base + "/hutch";
  auto s = cgfs::MakeDir(parent);
  if (!s.ok()) return s.error().Context("cgroup v2: prepare parent");
  // The sandboxes are children of <own>/hutch, so it must pass the
  // controllers down too.
  auto cpu2 = EnableControllers(parent);
  if (!cpu2.ok()) return cpu2.error().Context("cgroup v2: enable controllers");
  return std::unique_ptr<CgroupManager>(std::make_unique<ManagerV2>(parent, *cpu && *cpu2));
}

}  // namespace hutch::jail
