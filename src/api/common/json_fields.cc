#include "api/common/json_fields.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace hutch::api {

namespace {
Error Bad(const std::string& msg) { return MakeError(Code::kInvalidRequest, msg); }
}  // namespace

Status RejectUnknownFields(const nlohmann::json& j, std::initializer_list<const char*> allowed) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed)
      if (it.key() == a) ok = true;
    if (!ok) return Bad("unknown field '" + it.key() + "'");
  }
  return {};
}

Result<std::optional<std::string>> OptString(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Bad(std::string("'") + key + "' must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> OptInt(const nlohmann::json& j, const char* key, int64_t min,
                                      int64_t max) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  int64_t v;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return Bad(std::string("'") + key + "' is out of range");
    v = it->get<int64_t>();
  } else if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15)
      return Bad(std::string("'") + key + "' must be an integer");
    v = static_cast<int64_t>(d);
  } else {
    return Bad(std::string("'") + key + "' must be an integer");
  }
  if (v < min || v > max)
    return Bad(std::string("'") + key + "' must be between " + std::to_string(min) + " and " +
               std::to_string(max));
  return std::optional<int64_t>(v);
}

Result<std::optional<double>> OptNumber(const nlohmann::json& j, const char* key, double min,
                                        double max) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return Bad(std::string("'") + key + "' must be a number");
  double d = it->get<double>();
  if (!std::isfinite(d) || d < min || d > max)
    return Bad(std::string("'") + key + "' is out of range");
  return std::optional<double>(d);
}

Result<std::optional<bool>> OptBool(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Bad(std::string("'") + key + "' must be a boolean");
  return std::optional<bool>(it->get<bool>());
}

Result<std::optional<std::map<std::string, std::string>>> OptStringMap(const nlohmann::json& j,
                                                                       const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::map<std::string, std::string>>();
  if (!it->is_object()) return Bad(std::string("'") + key + "' must be an object of strings");
  std::map<std::string, std::string> out;
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string())
      return Bad(std::string("'") + key + "." + e.key() + "' must be a string");
    out[e.key()] = e.value().get<std::string>();
  }
  return std::optional<std::map<std::string, std::string>>(std::move(out));
}

Result<std::optional<std::map<std::string, std::string>>> OptEnvMap(const nlohmann::json& j,
                                                                    const char* key) {
  auto env = OptStringMap(j, key);
  if (!env.ok() || !*env) return env;
  for (const auto& [k, v] : **env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      return Bad("invalid env variable name '" + k + "' in '" + key + "'");
    if (v.find('\0') != std::string::npos)
      return Bad("env variable '" + k + "' in '" + key + "' contains a NUL byte");
  }
  return env;
}

Result<std::optional<std::vector<std::string>>> OptStringArray(const nlohmann::json& j,
                                                               const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::vector<std::string>>();
  if (!it->is_array()) return Bad(std::string("'") + key + "' must be an array of strings");
  std::vector<std::string> out;
  for (const auto& e : *it) {
    if (!e.is_string()) return Bad(std::string("'") + key + "' must be an array of strings");
    out.push_back(e.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Result<std::optional<int64_t>> QueryInt(const std::optional<std::string>& v, const char* key,
                                        int64_t min, int64_t max) {
  if (!v) return std::optional<int64_t>();
  if (v->empty() || v->size() > 18)
    return Bad(std::string("query '") + key + "' must be an integer");
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (*end != '\0') return Bad(std::string("query '") + key + "' must be an integer");
  if (x < min || x > max)
    return Bad(std::string("query '") + key + "' must be between " + std::to_string(min) + " and " +
               std::to_string(max));
  return std::optional<int64_t>(x);
}

Status CheckPath(const std::string& p, const char* key) {
  if (p.empty()) return Bad(std::string("'") + key + "' is required");
  if (p.size() > 4096) return Bad(std::string("'") + key + "' is too long");
  if (p.find('\0') != std::string::npos)
    return Bad(std::string("'") + key + "' contains a NUL byte");
  return {};
}

Result<SysTime> ParseRfc3339(const std::string& s) {
  std::tm tm{};
  int frac_ms = 0;
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return MakeError(Code::kInvalidRequest, "'" + s + "' is not an RFC 3339 time");
  if (*end == '.') {
    ++end;
    int digits = 0;
    while (*end >= '0' && *end <= '9') {
      if (digits < 3) frac_ms = frac_ms * 10 + (*end - '0');
      ++digits;
      ++end;
    }
    for (; digits < 3; ++digits) frac_ms *= 10;
  }
  int64_t offset_s = 0;
  if (*end == 'Z' || *end == 'z') {
    ++end;
  } else if ((*end == '+' || *end == '-') && std::strlen(end) == 6 && end[3] == ':') {
    const int sign = *end == '-' ? -1 : 1;
    offset_s = sign * ((end[1] - '0') * 36000 + (end[2] - '0') * 3600 + (end[4] - '0') * 600 +
                       (end[5] - '0') * 60);
    end += 6;
  } else {
    return MakeError(Code::kInvalidRequest, "'" + s + "' has no time zone (Z or +hh:mm)");
  }
  if (*end) return MakeError(Code::kInvalidRequest, "'" + s + "' is not an RFC 3339 time");
  const time_t t = timegm(&tm) - offset_s;
  return SysTime(std::chrono::seconds(t)) + std::chrono::milliseconds(frac_ms);
}

}  // namespace hutch::api
