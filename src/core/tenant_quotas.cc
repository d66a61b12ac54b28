#include "core/tenant_quotas.h"

#include <algorithm>
#include <cstdio>

namespace hutch {

namespace {

std::string Gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

Status CheckCountQuota(const char* what, int64_t used, int64_t adding, int64_t limit,
                       const char* flag) {
  if (used + adding <= limit) return {};
  return MakeError(Code::kQuotaExceeded, std::string("tenant quota of ") + std::to_string(limit) +
                                             " " + what + " exceeded: " + std::to_string(used) +
                                             " in use, " + std::to_string(adding) +
                                             " more asked (" + flag + ")");
}

Status CheckBytesQuota(const char* what, uint64_t used_bytes, uint64_t adding_bytes,
                       int64_t limit_gb, const char* flag) {
  // Clamped so the shift cannot overflow: 2^33 GB is no limit in practice.
  const uint64_t limit = static_cast<uint64_t>(std::clamp<int64_t>(limit_gb, 0, int64_t{1} << 33))
                         << 30;
  if (adding_bytes == 0 ? used_bytes < limit : used_bytes + adding_bytes <= limit) return {};
  std::string msg = std::string("tenant quota of ") + std::to_string(limit_gb) + " GB of " + what +
                    " exceeded: " + Gb(used_bytes) + " GB in use";
  if (adding_bytes) msg += ", " + Gb(adding_bytes) + " GB more asked";
  return MakeError(Code::kQuotaExceeded, msg + " (" + flag + ")");
}

}  // namespace hutch
