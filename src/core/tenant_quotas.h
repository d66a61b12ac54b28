// Per-tenant quotas (issue 32 #12): how much one owner id may hold at once
// when it creates through a tenant key. Admin keys are the operator's and
// are exempt. Each count is checked where the thing is registered, before
// the create's first suspension, so concurrent creates of one tenant cannot
// all pass the same check; sizes are known only once a snapshot or a
// template exists, so those refuse the next create once at or over.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hutch {

struct TenantQuotas {
  int max_sandboxes = 50;  // live: starting, running or paused
  int max_snapshots = 20;
  int64_t max_snapshot_gb = 20;  // sum of size_bytes
  int max_volumes = 20;
  int64_t max_volume_gb = 50;  // sum of size_mb
  int max_templates = 20;
  int64_t max_template_gb = 20;  // sum of size_bytes
};

// Ok while `used + adding <= limit`, else quota_exceeded naming the quota,
// its figures and the flag that sets it.
Status CheckCountQuota(const char* what, int64_t used, int64_t adding, int64_t limit,
                       const char* flag);
// Ok while `used_bytes + adding_bytes <= limit_gb` GiB, else quota_exceeded.
// `adding_bytes` 0 (a size known only once made): ok while under the limit.
Status CheckBytesQuota(const char* what, uint64_t used_bytes, uint64_t adding_bytes,
                       int64_t limit_gb, const char* flag);

}  // namespace hutch
