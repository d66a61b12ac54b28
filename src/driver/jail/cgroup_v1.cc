// cgroup v1: one directory per hierarchy (memory, pids, cpu, cpuacct,
// freezer; cpu and cpuacct are often co-mounted as "cpu,cpuacct", and any
// other grouping is handled the same way), each under hutchd's own cgroup of
// that hierarchy plus "/hutch".
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <sstream>

#include "driver/jail/cgroup_v1.h"

namespace hutch::jail {
namespace {

using cgfs::Clock;

enum Ctl : unsigned {
  kMemory = 1u << 0,
  kPids = 1u << 1,
  kCpu = 1u << 2,
  kCpuacct = 1u << 3,
  kFreezer = 1u << 4,
};

struct CtlName {
  Ctl ctl;
  const char* name;
};
constexpr CtlName kCtls[] = {
    {kMemory, "memory"},   {kPids, "pids"},       {kCpu, "cpu"},
    {kCpuacct, "cpuacct"}, {kFreezer, "freezer"},
};

// One mounted hierarchy and which of our controllers it carries.
struct Hierarchy {
  unsigned ctls = 0;
  std::string parent;  // <mount>/<hutchd's own path>/hutch
};

// The sandbox's directory in each hierarchy.
struct Dir {
  unsigned ctls = 0;
  std::string path;
};

class CgroupV1 final : public Cgroup {
 public:
  explicit CgroupV1(std::vector<Dir> dirs) : dirs_(std::move(dirs)) {}
  ~CgroupV1() override {
    if (!removed_) (void)Remove();
  }
  CgroupV1(const CgroupV1&) = delete;
  CgroupV1& operator=(const CgroupV1&) = delete;

  Status SetLimits(const CgroupLimits& l) {
    if (l.memory_bytes > 0) HUTCH_CHECK_OK(SetMemory(l.memory_bytes), "memory limit");
    // Swap is never allowed. With memsw (swap accounting) the memsw limit
    // set to the memory limit already forbids it; swappiness 0 also keeps
    // reclaim in this memcg from swapping anonymous memory when there is
    // no memsw file or no memory limit. Best effort: not all kernels let a
    // child cgroup set it.
    (void)cgfs::WriteFile(Path(kMemory) + "/memory.swappiness", "0");
    if (l.pids_max > 0) {
      HUTCH_CHECK_OK(cgfs::WriteFile(Path(kPids) + "/pids.max", std::to_string(l.pids_max)),
                     "pids limit");
    }
    if (l.cpus > 0 && Has(kCpu)) {
      const std::string d = Path(kCpu);
      // The kernel rejects quotas under 1 ms (EINVAL).
      const int64_t quota = std::max<int64_t>(1000, std::llround(l.cpus * cgfs::kCpuPeriodUs));
      HUTCH_CHECK_OK(cgfs::WriteFile(d + "/cpu.cfs_period_us", std::to_string(cgfs::kCpuPeriodUs)),
                     "cpu period");
      HUTCH_CHECK_OK(cgfs::WriteFile(d + "/cpu.cfs_quota_us", std::to_string(quota)), "cpu quota");
    }
    return {};
  }

  Status AddProcess(pid_t pid) override {
    // Writing to cgroup.procs (not tasks) moves the whole thread group.
    for (const Dir& d : dirs_) {
      auto s = cgfs::WriteFile(d.path + "/cgroup.procs", std::to_string(pid));
      if (!s.ok()) {
        Error e = s.error().Context("add pid " + std::to_string(pid));
        if (e.err == ESRCH) e.code = Code::kProcessNotFound;
        return e;
      }
    }
    return {};
  }

  Result<std::vector<UniqueFd>> OpenSelfAttach() override {
    std::vector<UniqueFd> fds;
    // The cpu hierarchy last: moving a running task into a new cpu group
    // reschedules it, so the cheap moves go first.
    std::vector<const Dir*> order;
    for (const Dir& d : dirs_)
      if ((d.ctls & kCpu) == 0) order.push_back(&d);
    for (const Dir& d : dirs_)
      if ((d.ctls & kCpu) != 0) order.push_back(&d);
    for (const Dir* d : order) {
      const std::string path = d->path + "/tasks";
      UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
      if (!fd) return ErrnoError("open " + path);
      fds.push_back(std::move(fd));
    }
    return fds;
  }

  Result<CgroupStats> Stats() override {
    CgroupStats st;
    const std::string mem = Path(kMemory);
    auto cur = cgfs::ReadUint(mem + "/memory.usage_in_bytes");
    if (!cur.ok()) return cur.error().Context("stats");
    st.memory_current = *cur;
    auto peak = cgfs::ReadUint(mem + "/memory.max_usage_in_bytes");
    if (peak.ok()) st.memory_peak = *peak;
    auto ooms = cgfs::ReadKeyed(mem + "/memory.oom_control", "oom_kill");
    if (ooms.ok()) st.oom_kills = *ooms;
    auto pids = cgfs::ReadUint(Path(kPids) + "/pids.current");
    if (!pids.ok()) return pids.error().Context("stats");
    st.pids_current = *pids;
    if (Has(kCpuacct)) {
      auto cpu = cgfs::ReadUint(Path(kCpuacct) + "/cpuacct.usage");
      if (!cpu.ok()) return cpu.error().Context("stats");
      st.cpu_usage_ns = *cpu;
    }
    return st;
  }

  uint64_t OomKills() override {
    // "oom_kill N" in memory.oom_control (since 4.13) counts the processes
    // the memcg OOM killer killed in this cgroup.
    auto n = cgfs::ReadKeyed(Path(kMemory) + "/memory.oom_control", "oom_kill");
    return n.ok() ? *n : 0;
  }

  uint64_t DirtyBytes() override {
    auto n = cgfs::ReadKeyed(Path(kMemory) + "/memory.stat", "dirty");
    return n.ok() ? *n : 0;
  }

  Status Freeze() override {
    if (!Has(kFreezer))
      return MakeError(Code::kNotSupported, "freeze: no freezer cgroup on this host");
    HUTCH_CHECK_OK(cgfs::WriteFile(Path(kFreezer) + "/freezer.state", "FROZEN"), "freeze");
    if (WaitFrozen(std::chrono::milliseconds(1000))) return {};
    // Never leave the sandbox half frozen (FREEZING) behind an error.
    (void)Thaw();
    return MakeError(Code::kUnavailable,
                     "freeze: " + Path(kFreezer) + " did not reach FROZEN in 1 s");
  }

  Status Thaw() override {
    if (!Has(kFreezer))
      return MakeError(Code::kNotSupported, "thaw: no freezer cgroup on this host");
    HUTCH_CHECK_OK(cgfs::WriteFile(Path(kFreezer) + "/freezer.state", "THAWED"), "thaw");
    return {};
  }

  void KillAll() override {
    // Freeze first, then kill, then thaw. While frozen nothing inside can
    // fork or exit, so the pids read from cgroup.procs are all alive and
    // cannot be reused by an unrelated process before our kill() reaches
    // them, and a fork loop cannot outrun us. A frozen task does not act
    // on SIGKILL until thawed (it sits in the refrigerator), hence the
    // thaw right after the signals. The loop afterwards catches anything
    // the freeze missed (no freezer, freeze timed out).
    // An empty cgroup (a deleted sandbox whose PID 1 is gone: the kernel
    // killed and reaped its pid namespace) is left alone: the first freeze
    // and the last thaw on the host switch a kernel static key, patching
    // kernel text on every CPU — the dearest step of a delete. Nothing
    // can join an empty cgroup but through hutchd.
    if (IsEmpty()) return;
    if (Has(kFreezer) && cgfs::WriteFile(Path(kFreezer) + "/freezer.state", "FROZEN").ok()) {
      (void)WaitFrozen(std::chrono::milliseconds(500));
    }
    const auto deadline = Clock::now() + cgfs::kRetryBudget;
    for (;;) {
      bool any = false;
      for (const Dir& d : dirs_) {
        auto pids = cgfs::ReadProcs(d.path);
        if (!pids.ok()) continue;
        for (pid_t p : *pids) {
          ::kill(p, SIGKILL);
          any = true;
        }
      }
      if (Has(kFreezer)) {
        // Also thaws a sandbox that Freeze() left frozen: SIGKILL is only
        // acted on once the task leaves the refrigerator.
        (void)cgfs::WriteFile(Path(kFreezer) + "/freezer.state", "THAWED");
      }
      if (!any || Clock::now() >= deadline) return;
      cgfs::SleepMs(5);
    }
  }

  Status Remove() override {
    if (removed_) return {};
    KillAll();
    const auto deadline = Clock::now() + cgfs::kRetryBudget;
    Status first;
    for (const Dir& d : dirs_) {
      auto s = cgfs::RemoveDir(d.path, deadline);
      if (!s.ok() && first.ok()) first = s.error().Context("remove cgroup");
    }
    if (first.ok()) removed_ = true;
    return first;
  }

  std::vector<std::string> Paths() const override {
    std::vector<std::string> out;
    for (const Dir& d : dirs_) out.push_back(d.path);
    return out;
  }

 private:
  // No process in any of the hierarchies (an unreadable one counts as not
  // empty).
  bool IsEmpty() const {
    for (const Dir& d : dirs_) {
      auto pids = cgfs::ReadProcs(d.path);
      if (!pids.ok() || !pids->empty()) return false;
    }
    return true;
  }
  bool Has(Ctl c) const {
    for (const Dir& d : dirs_) {
      if (d.ctls & c) return true;
    }
    return false;
  }
  // Directory of the hierarchy carrying `c` ("" when the host has none;
  // memory and pids always exist: Detect requires them).
  std::string Path(Ctl c) const {
    for (const Dir& d : dirs_) {
      if (d.ctls & c) return d.path;
    }
    return "";
  }

  Status SetMemory(int64_t bytes) {
    const std::string d = Path(kMemory);
    const std::string v = std::to_string(bytes);
    const std::string memsw = d + "/memory.memsw.limit_in_bytes";
    const bool has_memsw = cgfs::Exists(memsw);
    // The kernel keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes
    // and rejects a write that would break it with EINVAL
    // (mem_cgroup_resize_max). Lowering (a fresh cgroup is unlimited):
    // limit first, then memsw. Raising: memsw first, then limit; we fall
    // back to that order when the first write is refused.
    auto s = cgfs::WriteFile(d + "/memory.limit_in_bytes", v);
    if (s.ok()) {
      if (has_memsw) return cgfs::WriteFile(memsw, v);
      return {};
    }
    if (s.error().err != EINVAL || !has_memsw) return s;
    HUTCH_CHECK_OK(cgfs::WriteFile(memsw, v), "raise memsw");
    return cgfs::WriteFile(d + "/memory.limit_in_bytes", v);
  }

  // The legacy freezer moves FREEZING -> FROZEN only when freezer.state is
  // read (update_if_frozen() in kernel/cgroup/legacy_freezer.c runs from
  // the read handler), so we must poll the file rather than wait once.
  bool WaitFrozen(std::chrono::milliseconds budget) {
    const auto deadline = Clock::now() + budget;
    const std::string f = Path(kFreezer) + "/freezer.state";
    for (;;) {
      auto s = cgfs::ReadFile(f);
      if (s.ok() && s->rfind("FROZEN", 0) == 0) return true;
      if (!s.ok() || Clock::now() >= deadline) return false;
      cgfs::SleepMs(1);
    }
  }

  std::vector<Dir> dirs_;
  bool removed_ = false;
};

class ManagerV1 final : public CgroupManager {
 public:
  explicit ManagerV1(std::vector<Hierarchy> h) : hier_(std::move(h)) {}
  int Version() const override { return 1; }

  Result<std::unique_ptr<Cgroup>> Create(const std::string& name,
                                         const CgroupLimits& limits) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    std::vector<Dir> dirs;
    for (const Hierarchy& h : hier_) {
      const std::string p = h.parent + "/" + name;
      if (::mkdir(p.c_str(), 0755) != 0) {
        const int err = errno;
        Error e = ErrnoError("cgroup: mkdir " + p, err);
        if (err == EEXIST) e.code = Code::kConflict;
        // Undo the directories made so far (they are empty).
        CgroupV1 partial(std::move(dirs));
        (void)partial.Remove();
        return e;
      }
      dirs.push_back(Dir{h.ctls, p});
    }
    auto cg = std::make_unique<CgroupV1>(std::move(dirs));
    auto s = cg->SetLimits(limits);
    if (!s.ok()) return s.error().Context("cgroup " + name);  // cg's destructor removes the dirs
    return std::unique_ptr<Cgroup>(std::move(cg));
  }

  std::vector<std::string> ListExisting() override {
    std::vector<std::string> out;
    for (const Hierarchy& h : hier_) {
      for (std::string& n : cgfs::ListChildDirs(h.parent)) {
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
      }
    }
    return out;
  }

  Status RemoveExisting(const std::string& name) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    std::vector<Dir> dirs;
    for (const Hierarchy& h : hier_) dirs.push_back(Dir{h.ctls, h.parent + "/" + name});
    CgroupV1 cg(std::move(dirs));
    return cg.Remove();  // missing directories count as removed
  }

  Result<std::unique_ptr<Cgroup>> Open(const std::string& name) override {
    if (!cgfs::ValidName(name))
      return MakeError(Code::kInvalidRequest, "cgroup: bad name '" + name + "'");
    std::vector<Dir> dirs;
    for (const Hierarchy& h : hier_) {
      std::string d = h.parent + "/" + name;
      if (access(d.c_str(), F_OK) != 0)
        return MakeError(Code::kNotFound, "cgroup " + d + " is gone");
      dirs.push_back(Dir{h.ctls, d});
    }
    return std::unique_ptr<Cgroup>(new CgroupV1(std::move(dirs)));
  }

 private:
  std::vector<Hierarchy> hier_;
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string t;
  while (std::getline(in, t, sep)) out.push_back(t);
  return out;
}

}  // namespace

Result<std::unique_ptr<CgroupManager>> DetectV1() {
  // /proc/self/cgroup: "id:controller[,controller...]:path" per v1
  // hierarchy ("0::path" is the v2 one, "N:name=systemd:..." has no
  // controllers). The path is relative to the hierarchy's root.
  auto self = cgfs::ReadFile("/proc/self/cgroup");
  if (!self.ok()) return self.error().Context("cgroup v1");
  auto mounts = cgfs::ReadMountInfo();
  if (!mounts.ok()) return mounts.error().Context("cgroup v1");

  std::vector<Hierarchy> hier;
  std::istringstream in(*self);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::vector<std::string> names = Split(line.substr(a + 1, b - a - 1), ',');
    const std::string own = line.substr(b + 1);
    unsigned ctls = 0;
    for (const CtlName& c : kCtls) {
      if (std::find(names.begin(), names.end(), c.name) != names.end()) ctls |= c.ctl;
    }
    if (ctls == 0) continue;
    // The mount of this hierarchy: a v1 cgroup mount whose super options
    // name one of its controllers and whose root contains our cgroup.
    std::string dir;
    for (const cgfs::MountEntry& m : *mounts) {
      if (m.fstype != "cgroup") continue;
      bool match = false;
      for (const std::string& n : names) {
        if (std::find(m.super_options.begin(), m.super_options.end(), n) != m.super_options.end())
          match = true;
      }
      if (!match) continue;
      dir = cgfs::DirUnderMount(m, own);
      if (!dir.empty()) break;
    }
    if (dir.empty()) continue;  // hierarchy not visible in this mount namespace
    hier.push_back(Hierarchy{ctls, dir + "/hutch"});
  }

  unsigned have = 0;
  for (const Hierarchy& h : hier) have |= h.ctls;
  for (Ctl required : {kMemory, kPids}) {
    if (!(have & required)) {
      const char* n = required == kMemory ? "memory" : "pids";
      return MakeError(Code::kUnavailable, std::string("cgroup v1: the ") + n +
                                               " controller is not mounted (need /sys/fs/cgroup/" +
                                               n + ")");
    }
  }
  for (const Hierarchy& h : hier) {
    auto s = cgfs::MakeDir(h.parent);
    if (!s.ok()) return s.error().Context("cgroup v1: prepare parent");
  }
  return std::unique_ptr<CgroupManager>(std::make_unique<ManagerV1>(std::move(hier)));
}

}  // namespace hutch::jail
