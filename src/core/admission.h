// Admission: whether the host takes more sandboxes now. Every path that
// starts an instance asks it first — a create, a fork's children, the warm
// pool's refill — and gets either room or `capacity_exhausted` (503,
// retryable) naming what ran out and the flag that sets it.
//
// Why by real pressure and not by a sum of limits: an idle jail sandbox
// with memory_mb 128 takes about 1 MiB of host memory, so summing limits
// refused a fleet at a few percent of what the host could hold, while a set
// of sandboxes that really use their memory can still exhaust a host whose
// sum stays under any cap sized for idle ones. So a create is refused when
// what the host *has* runs short: MemAvailable under a reserve, memory PSI
// ("full", where the kernel has PSI) over a threshold, tasks or open files
// near the kernel's limits. Creates still starting have not shown up in
// those figures yet, so each is charged a small estimate until it has.
// The count cap (--max-sandboxes, derived from the host by default) and
// the sum-of-limits cap (--max-memory-committed-mb, opt-in) still hold.
//
// The pools: warm sandboxes (core/warm_pool) count towards
// --max-sandboxes and the committed sum like any sandbox, and their real
// use is in the host's figures; a create that claims one adds nothing and
// is not checked again. Network slots made ahead (--net-warm) and the
// disk pool are small, bounded, and already in the host's figures.
// I/O thread only (it holds no state but its options and source).
#pragma once

#include <cstdint>
#include <functional>

#include "common/host_stats.h"
#include "common/result.h"

namespace hutch {

struct AdmissionOptions {
  int max_sandboxes = 200;
  // Sum of memory_mb over live and warm sandboxes the host accepts; 0 = no
  // cap (the default: admission goes by what the host really has).
  int64_t max_memory_committed_mb = 0;
  // MemAvailable a create must leave free (MiB).
  int64_t memory_reserve_mb = 1024;
  // Memory PSI "full avg10" (percent) at or over which creates are
  // refused; 0 = not checked.
  double memory_pressure_max = 10;
};

// What core itself counts at the moment of the check.
struct HostLoad {
  int live = 0;              // running or paused sandboxes
  int starting = 0;          // creates (and warm fills) between their check and their instance
  int warm = 0;              // warm sandboxes nobody has claimed yet
  int64_t committed_mb = 0;  // memory_mb summed over live, starting and warm
};

// What one admission asks for: `count` sandboxes of `memory_mb` each.
struct Demand {
  int count = 1;
  int64_t memory_mb = 0;
};

// What a sandbox may take before it shows in the host's figures: its
// start (agent, mounts, the template's start command's first pages) is
// about 1 MiB for a jail, more for a booting VM; 32 MiB covers both
// without making a burst of 200 need 200 × memory_mb of headroom.
constexpr int64_t kStartingMemoryMb = 32;
constexpr int64_t kStartingTasks = 4;
constexpr int64_t kStartingFiles = 32;

class Admission {
 public:
  using StatsSource = std::function<Result<HostStats>()>;

  explicit Admission(AdmissionOptions opts) : opts_(opts) {}
  // Without a source only the count and committed caps apply (core's
  // unit tests; tools).
  void set_stats_source(StatsSource s) { source_ = std::move(s); }
  const AdmissionOptions& options() const { return opts_; }

  // Room for `d` given `load`, or capacity_exhausted saying why.
  Status Check(const HostLoad& load, const Demand& d) const;

 private:
  Status CheckHost(const HostLoad& load, const Demand& d) const;

  AdmissionOptions opts_;
  StatsSource source_;
};

// The defaults hutchd derives from the host when no flag sets them
// (docs/api.md "Admission"; each term says what it protects).
struct HostShape {
  int64_t mem_total_mb = 0;
  int64_t task_limit = 0;  // min(kernel.pid_max, kernel.threads-max)
  int64_t cores = 1;       // CPUs hutchd may run on
  int64_t fd_limit = 0;    // hutchd's own RLIMIT_NOFILE (after raising it)
};
// min(mem_total_mb / 16, task_limit / 16, 1024 × cores,
//     (fd_limit − 2048) / 8), at least 1.
int DefaultMaxSandboxes(const HostShape& h);
// A tenth of the host's memory, within [256 MiB, 4 GiB].
int64_t DefaultMemoryReserveMb(int64_t mem_total_mb);
// The hutchd fds one sandbox holds (agent socket, pidfds, its root and
// disk while it starts...; ~6 measured), rounded up.
constexpr int64_t kFdsPerSandbox = 8;
// hutchd fds kept for everything but sandboxes: the pools, the store,
// listeners and a floor of client connections.
constexpr int64_t kFdsReserved = 2048;

}  // namespace hutch
