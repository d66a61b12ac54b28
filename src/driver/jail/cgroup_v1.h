// Internal to the cgroup module: the v1 implementation's factory, and the
// cgroupfs helpers shared by both versions (defined in cgroup.cc; the v2
// implementation includes this header for them). Users include cgroup.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "driver/jail/cgroup.h"

namespace hutch::jail {

namespace cgfs {

using Clock = std::chrono::steady_clock;

// How long KillAll and Remove keep retrying: killed processes need a moment
// to leave the cgroup (exit_mm runs before cgroup_exit), and rmdir says
// EBUSY until they have.
inline constexpr std::chrono::milliseconds kRetryBudget{2000};
// CPU bandwidth period (v1 cpu.cfs_period_us, v2 cpu.max): the kernel default.
inline constexpr int64_t kCpuPeriodUs = 100000;

// Reads a whole cgroupfs or procfs file.
Result<std::string> ReadFile(const std::string& path);
// Writes `value` with a single write(2): cgroupfs parses each write on its
// own, so a value must never be split across writes.
Status WriteFile(const std::string& path, const std::string& value);
bool Exists(const std::string& path);
// First token of the file as an unsigned number ("max" is an error).
Result<uint64_t> ReadUint(const std::string& path);
// Value of `key` in a file of "key value" lines (memory.oom_control,
// memory.events, cpu.stat); 0 when the key is absent.
Result<uint64_t> ReadKeyed(const std::string& path, const std::string& key);
// The pids in `dir`/cgroup.procs; empty when the directory is gone.
Result<std::vector<pid_t>> ReadProcs(const std::string& dir);
// Sandbox names become directory names: [A-Za-z0-9_.-], 1..128 chars, no
// leading dot (so never "." or "..").
bool ValidName(const std::string& name);
// mkdir that accepts an existing directory.
Status MakeDir(const std::string& path);
// rmdir, retrying while the kernel reports EBUSY (tasks still exiting)
// until `deadline`; ENOENT counts as success.
Status RemoveDir(const std::string& path, Clock::time_point deadline);
// Names of the subdirectories of `dir` (empty when it does not exist).
std::vector<std::string> ListChildDirs(const std::string& dir);
void SleepMs(int ms);
// "/a/b" + "/c" with the root path "/" handled: Join("/x", "/") == "/x".
std::string Join(const std::string& base, const std::string& rel);

struct MountEntry {
  std::string root;         // path of the mount's root inside its filesystem
  std::string mount_point;  // where it is mounted
  std::string fstype;
  std::vector<std::string> super_options;  // for cgroup v1: the controllers
};
Result<std::vector<MountEntry>> ReadMountInfo();

// Maps the calling process's cgroup path `own` (as /proc/self/cgroup shows
// it) to a directory under `m`, or "" when `m` does not contain it (a bind
// mount of another subtree).
std::string DirUnderMount(const MountEntry& m, const std::string& own);

}  // namespace cgfs

// Finds the v1 hierarchies of the managed controllers and creates the
// "hutch" parent in hutchd's own cgroup of each. Fails when memory or pids
// is missing.
Result<std::unique_ptr<CgroupManager>> DetectV1();

}  // namespace hutch::jail
