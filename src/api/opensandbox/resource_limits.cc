#include "api/opensandbox/resource_limits.h"

#include <cmath>
#include <cstdlib>

namespace hutch::api::opensandbox {

namespace {

// The number at the front of `s` and the unit after it.
bool SplitQuantity(const std::string& s, double* num, std::string* unit) {
  if (s.empty() || s.size() > 32) return false;
  char* end = nullptr;
  *num = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(*num) || *num < 0) return false;
  *unit = std::string(end);
  return true;
}

}  // namespace

Result<int64_t> ParseByteQuantity(const std::string& s) {
  double n = 0;
  std::string unit;
  if (!SplitQuantity(s, &n, &unit))
    return MakeError(Code::kInvalidRequest, "'" + s + "' is not a quantity");
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"k", 1e3},
                                                          {"K", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"Ki", 1024.0},
                                                          {"Mi", 1048576.0},
                                                          {"Gi", 1073741824.0},
                                                          {"Ti", 1099511627776.0}};
  for (const auto& [u, mult] : kUnits)
    if (unit == u) {
      const double bytes = n * mult;
      if (bytes > 1e15)
        return MakeError(Code::kInvalidRequest, "quantity '" + s + "' is too large");
      return static_cast<int64_t>(bytes);
    }
  return MakeError(Code::kInvalidRequest,
                   "unknown unit in quantity '" + s + "' (k, M, G, T, Ki, Mi, Gi, Ti)");
}

Result<double> ParseCpuQuantity(const std::string& s) {
  double n = 0;
  std::string unit;
  if (!SplitQuantity(s, &n, &unit))
    return MakeError(Code::kInvalidRequest, "'" + s + "' is not a cpu quantity");
  if (unit == "m") n /= 1000;
  else if (!unit.empty())
    return MakeError(Code::kInvalidRequest, "unknown unit in cpu quantity '" + s + "'");
  if (n <= 0) return MakeError(Code::kInvalidRequest, "cpu must be positive");
  return n;
}

Result<ResourceLimits> ParseResourceLimits(const nlohmann::json& j) {
  ResourceLimits out;
  if (!j.is_object())
    return MakeError(Code::kInvalidRequest, "'resourceLimits' must be an object of strings");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      return MakeError(Code::kInvalidRequest, "resourceLimits." + k + " must be a string");
    const std::string q = v.get<std::string>();
    if (k == "cpu") {
      auto c = ParseCpuQuantity(q);
      if (!c.ok()) return c.error();
      out.cpu = *c;
    } else if (k == "memory" || k == "ephemeral-storage" || k == "disk") {
      auto b = ParseByteQuantity(q);
      if (!b.ok()) return b.error();
      // hutch sizes in MiB; round up so a limit is never tightened.
      const int64_t mb = std::max<int64_t>(1, (*b + 1048575) / 1048576);
      (k == "memory" ? out.memory_mb : out.disk_mb) = mb;
    } else {
      return MakeError(Code::kNotSupported,
                       "resourceLimits." + k +
                           " is not supported by hutch (cpu, memory, ephemeral-storage are)");
    }
  }
  return out;
}

}  // namespace hutch::api::opensandbox
