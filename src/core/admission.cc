#include "core/admission.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace hutch {

namespace {

// Tasks and open files kept free of sandboxes: the host (sshd, the
// operator's shell, hutchd's own threads and connections) must still
// fork and open files when sandboxes have taken the rest. A tenth of the
// limit, at least a fixed floor for small limits.
int64_t TaskReserve(int64_t limit) { return std::max<int64_t>(1024, limit / 10); }
int64_t FileReserve(int64_t limit) { return std::max<int64_t>(8192, limit / 10); }

std::string Fmt1(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

Error Full(const std::string& what) { return MakeError(Code::kCapacityExhausted, what); }

}  // namespace

Status Admission::Check(const HostLoad& load, const Demand& d) const {
  const int count = std::max(1, d.count);
  if (load.live + load.starting + load.warm + count > opts_.max_sandboxes)
    return Full("host is at its limit of " + std::to_string(opts_.max_sandboxes) +
                " sandboxes (--max-sandboxes)");
  const int64_t mb = d.memory_mb * count;
  if (opts_.max_memory_committed_mb > 0 && load.committed_mb + mb > opts_.max_memory_committed_mb)
    return Full("host has no room for " + std::to_string(mb) + " MB more (" +
                std::to_string(load.committed_mb) + " of " +
                std::to_string(opts_.max_memory_committed_mb) +
                " MB committed, --max-memory-committed-mb)");
  if (!source_) return Status{};
  return CheckHost(load, d);
}

Status Admission::CheckHost(const HostLoad& load, const Demand& d) const {
  auto st = source_();
  // procfs fails at run time only when hutchd itself is out of something
  // (EMFILE: its fd limit): no state to start another sandbox in.
  if (!st.ok()) return Full("cannot read the host's state: " + st.error().message);
  // Creates between their check and their instance, this one included:
  // not in the figures yet.
  const int64_t pending = load.starting + std::max(1, d.count);
  const int64_t mem_pending =
      pending * std::min(kStartingMemoryMb, std::max<int64_t>(d.memory_mb, 1));
  if (st->mem_available_mb - mem_pending < opts_.memory_reserve_mb)
    return Full("host memory is low: " + std::to_string(st->mem_available_mb) + " MB available, " +
                std::to_string(mem_pending) + " MB for sandboxes starting, " +
                std::to_string(opts_.memory_reserve_mb) + " MB kept free (--memory-reserve-mb)");
  if (opts_.memory_pressure_max > 0 && st->memory_full_avg10 &&
      *st->memory_full_avg10 >= opts_.memory_pressure_max)
    return Full("host is under memory pressure: tasks stalled on memory " +
                Fmt1(*st->memory_full_avg10) + "% of the last 10 s (limit " +
                Fmt1(opts_.memory_pressure_max) + "%, --memory-pressure-max)");
  if (st->tasks + pending * kStartingTasks > st->task_limit - TaskReserve(st->task_limit))
    return Full("host is near its task limit: " + std::to_string(st->tasks) + " of " +
                std::to_string(st->task_limit) + " (kernel.pid_max, kernel.threads-max; " +
                std::to_string(TaskReserve(st->task_limit)) + " kept free)");
  if (st->files_open + pending * kStartingFiles > st->files_max - FileReserve(st->files_max))
    return Full("host is near its open-file limit: " + std::to_string(st->files_open) + " of " +
                std::to_string(st->files_max) + " (fs.file-max; " +
                std::to_string(FileReserve(st->files_max)) + " kept free)");
  return Status{};
}

int DefaultMaxSandboxes(const HostShape& h) {
  // Each term is what one more idle sandbox costs of that resource, with
  // room left for sandboxes that work: ~1 MiB of memory each idle (16
  // leaves them 15 more on average), one agent task plus commands (16
  // tasks each), a share of the cores' time for the I/O thread's keep-
  // alives and reaper passes, and hutchd's own fds.
  int64_t n = h.mem_total_mb / 16;
  n = std::min(n, h.task_limit / 16);
  n = std::min(n, 1024 * std::max<int64_t>(1, h.cores));
  n = std::min(n, (h.fd_limit - kFdsReserved) / kFdsPerSandbox);
  return static_cast<int>(std::clamp<int64_t>(n, 1, 1 << 20));
}

int64_t DefaultMemoryReserveMb(int64_t mem_total_mb) {
  return std::clamp<int64_t>(mem_total_mb / 10, 256, 4096);
}

}  // namespace hutch
