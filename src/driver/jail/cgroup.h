// Per-sandbox cgroups, on whichever cgroup version the host runs.
//
// CgroupManager finds, once at startup, where hutchd may create cgroups:
// on v1 (these machines) one directory per controller (memory, pids, cpu,
// cpuacct, freezer) under hutchd's own cgroup of that controller, plus
// "/hutch"; on v2 a delegated subtree under hutchd's own cgroup (hutchd
// moves itself into a leaf so the subtree may enable controllers).
// A Cgroup owns the directories of one sandbox and removes them when
// destroyed. Not thread-safe: owned and used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "driver/driver.h"

namespace hutch::jail {

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0 = no limit; swap is never allowed
  int64_t pids_max = 0;      // 0 = no limit
  double cpus = 0;           // 0 = no limit; 1.5 = one and a half cores
};

struct CgroupStats {
  uint64_t cpu_usage_ns = 0;
  uint64_t memory_current = 0;
  uint64_t memory_peak = 0;  // 0 when the kernel does not report it
  uint64_t pids_current = 0;
  uint64_t oom_kills = 0;  // processes the kernel OOM-killed in this cgroup
};

// The cgroup's share of a sandbox's stats (disk and network are the
// driver's to fill in).
inline InstanceStats ToInstanceStats(const CgroupStats& s) {
  InstanceStats out;
  out.cpu_usage_ns = s.cpu_usage_ns;
  out.memory_current = s.memory_current;
  out.memory_peak = s.memory_peak;
  out.pids_current = s.pids_current;
  out.oom_kills = s.oom_kills;
  return out;
}

class Cgroup {
 public:
  virtual ~Cgroup() = default;  // kills what is left inside and removes the dirs
  // Moves process `pid` into every controller of this cgroup.
  virtual Status AddProcess(pid_t pid) = 0;
  // Files a process writes "0" to in order to move itself into every
  // controller of this cgroup (v1: each hierarchy's `tasks`), opened here
  // so the write is judged by hutchd's credentials, not the writer's.
  // Empty where the version has none (v2 moves whole thread groups only:
  // AddProcess). A task that moves only itself skips the kernel's global
  // thread-group lock, whose writer waits for an RCU grace period and
  // holds off every fork on the host meanwhile.
  virtual Result<std::vector<UniqueFd>> OpenSelfAttach() = 0;
  virtual Result<CgroupStats> Stats() = 0;
  // Count of OOM kills so far (cheap; read before and after an exec).
  virtual uint64_t OomKills() = 0;
  // Page cache bytes written by the cgroup's processes and not yet written
  // back (memory.stat); 0 when unknown.
  virtual uint64_t DirtyBytes() = 0;
  virtual Status Freeze() = 0;
  virtual Status Thaw() = 0;
  // SIGKILLs every process still inside (thawing first if frozen).
  virtual void KillAll() = 0;
  // Kills what is left and removes the directories, retrying while the
  // kernel still reports them busy (up to ~2 s). Idempotent.
  virtual Status Remove() = 0;
  // Directories (one per v1 controller, or the single v2 one).
  virtual std::vector<std::string> Paths() const = 0;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;
  // Detects v1/v2 and prepares the parent directories.
  static Result<std::unique_ptr<CgroupManager>> Detect();
  virtual int Version() const = 0;  // 1 or 2
  virtual Result<std::unique_ptr<Cgroup>> Create(const std::string& name,
                                                 const CgroupLimits& limits) = 0;
  // Names of child cgroups left by an earlier run (for reconcile at start).
  virtual std::vector<std::string> ListExisting() = 0;
  // Kills the processes in a leftover cgroup and removes it.
  virtual Status RemoveExisting(const std::string& name) = 0;
  // Takes ownership of an existing cgroup (a sandbox adopted after a
  // restart); not_found when any of its directories is missing.
  virtual Result<std::unique_ptr<Cgroup>> Open(const std::string& name) = 0;
};

}  // namespace hutch::jail
