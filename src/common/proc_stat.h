// Facts about a host process read from /proc/<pid>/stat.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/result.h"

namespace hutch {

// Start time of `pid` in clock ticks since boot (field 22 of
// /proc/<pid>/stat): with the pid it names one process for the lifetime of
// the host, so a recycled pid is never mistaken for a process a driver
// started (a sandbox's agent, a VM's QEMU).
Result<uint64_t> ProcStartTime(pid_t pid);

}  // namespace hutch
