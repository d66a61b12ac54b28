// Internal to the cgroup module: the v2 implementation's factory.
#pragma once

#include <memory>

#include "common/result.h"
#include "driver/jail/cgroup.h"

namespace hutch::jail {

// Prepares a delegated subtree under hutchd's own cgroup: moves hutchd into
// the leaf "<own>/hutchd" (a v2 cgroup with processes cannot enable
// controllers for its children), enables memory, pids and cpu for
// "<own>/hutch", where the sandboxes go. Fails when memory or pids cannot
// be enabled.
Result<std::unique_ptr<CgroupManager>> DetectV2();

}  // namespace hutch::jail
