// OpenSandbox's resourceLimits (Kubernetes quantities: cpu "1" / "500m",
// memory "2Gi" / "512Mi", ephemeral-storage) as hutch's cgroup limits.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch::api::opensandbox {

struct ResourceLimits {
  std::optional<double> cpu;
  std::optional<int64_t> memory_mb;
  std::optional<int64_t> disk_mb;
};

// Known keys: cpu, memory, ephemeral-storage (alias disk); any other key
// (gpu, ...) is not_supported rather than silently ignored.
Result<ResourceLimits> ParseResourceLimits(const nlohmann::json& j);
// A quantity in bytes: plain, decimal (k, M, G, T) or binary (Ki, Mi, Gi, Ti).
Result<int64_t> ParseByteQuantity(const std::string& s);
// CPUs: "2", "0.5", "500m".
Result<double> ParseCpuQuantity(const std::string& s);

}  // namespace hutch::api::opensandbox
