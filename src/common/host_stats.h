// HostStats: what the host has left right now — available memory, memory
// pressure, tasks and open files against the kernel's limits — read from
// procfs. Admission (core/admission) refuses creates on it before the host
// runs out, instead of trusting a sum of limits that idle sandboxes never
// use.
//
// The reader takes the procfs root, so tests point it at a directory of
// fake files (a host near exhaustion without exhausting one). Reading is a
// handful of small procfs reads (~tens of µs): cheap enough for every
// create. Stateless; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"

namespace hutch {

struct HostStats {
  int64_t mem_total_mb = 0;
  // MemAvailable: what the kernel estimates it can hand out without
  // swapping (free memory plus reclaimable cache), not MemFree.
  int64_t mem_available_mb = 0;
  // Memory PSI, "full avg10": the share of the last 10 s (percent) in
  // which every non-idle task stalled on memory. Absent where the kernel
  // has no PSI (CONFIG_PSI off, or psi=0 on its command line).
  std::optional<double> memory_full_avg10;
  // Tasks (threads) on the host, and the lower of kernel.pid_max and
  // kernel.threads-max: past it fork() fails everywhere, hutchd included.
  int64_t tasks = 0;
  int64_t task_limit = 0;
  // Open file handles (fs.file-nr, first field) and fs.file-max.
  int64_t files_open = 0;
  int64_t files_max = 0;
};

class HostStatsReader {
 public:
  explicit HostStatsReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}
  // Every figure but the PSI is required: a missing or malformed file is
  // an error naming it.
  Result<HostStats> Read() const;
  const std::string& proc_root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace hutch
