#include "api/e2b/proto_json.h"

#include <ctime>

#include "common/base64.h"

namespace hutch::api::e2b {

namespace {

Error Bad(const char* key, const char* want) {
  return MakeError(Code::kInvalidRequest, std::string("field '") + key + "' must be " + want);
}

const Json* Field(const Json& m, const char* key) {
  if (!m.is_object()) return nullptr;
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return nullptr;
  return &*it;
}

// Integers may come as JSON numbers or decimal strings.
Result<int64_t> Integer(const Json& v, const char* key, int64_t min, int64_t max) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return Bad(key, "in range");
    n = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (d != static_cast<double>(static_cast<int64_t>(d))) return Bad(key, "an integer");
    n = static_cast<int64_t>(d);
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t i = s.size() && s[0] == '-' ? 1 : 0;
    if (i == s.size() || s.size() > 20) return Bad(key, "an integer");
    for (size_t k = i; k < s.size(); ++k)
      if (s[k] < '0' || s[k] > '9') return Bad(key, "an integer");
    try {
      n = std::stoll(s);
    } catch (...) {
      return Bad(key, "in range");
    }
  } else {
    return Bad(key, "an integer");
  }
  if (n < min || n > max) return Bad(key, "in range");
  return n;
}

}  // namespace

Result<std::string> PjString(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return std::string();
  if (!v->is_string()) return Bad(key, "a string");
  return v->get<std::string>();
}

Result<bool> PjBool(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return false;
  if (!v->is_boolean()) return Bad(key, "a boolean");
  return v->get<bool>();
}

Result<uint32_t> PjUint32(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return uint32_t{0};
  auto n = Integer(*v, key, 0, UINT32_MAX);
  if (!n.ok()) return n.error();
  return static_cast<uint32_t>(*n);
}

Result<int64_t> PjInt64(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return int64_t{0};
  return Integer(*v, key, INT64_MIN, INT64_MAX);
}

Result<std::string> PjBytes(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return std::string();
  if (!v->is_string()) return Bad(key, "base64 text");
  std::string out;
  if (!Base64Decode(v->get_ref<const std::string&>(), &out)) return Bad(key, "base64 text");
  return out;
}

Result<Json> PjMessage(const Json& m, const char* key) {
  const Json* v = Field(m, key);
  if (!v) return Json::object();
  if (!v->is_object()) return Bad(key, "an object");
  return *v;
}

Result<std::vector<std::pair<std::string, std::string>>> PjStringMap(const Json& m,
                                                                     const char* key) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json* v = Field(m, key);
  if (!v) return out;
  if (!v->is_object()) return Bad(key, "an object of strings");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it.value().is_string()) return Bad(key, "an object of strings");
    out.emplace_back(it.key(), it.value().get<std::string>());
  }
  return out;
}

Result<std::vector<std::string>> PjStringList(const Json& m, const char* key) {
  std::vector<std::string> out;
  const Json* v = Field(m, key);
  if (!v) return out;
  if (!v->is_array()) return Bad(key, "an array of strings");
  for (const auto& e : *v) {
    if (!e.is_string()) return Bad(key, "an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<int> PjEnum(const Json& m, const char* key,
                   const std::vector<std::pair<const char*, int>>& names) {
  const Json* v = Field(m, key);
  if (!v) return 0;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    for (const auto& [name, num] : names)
      if (s == name) return num;
    return Bad(key, "a known enum value");
  }
  auto n = Integer(*v, key, INT32_MIN, INT32_MAX);
  if (!n.ok()) return n.error();
  return static_cast<int>(*n);
}

std::string PjTimestamp(int64_t unix_seconds, int32_t nanos) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (nanos > 0) {
    char frac[16];
    snprintf(frac, sizeof frac, ".%09d", nanos);
    std::string f = frac;
    while (f.size() > 4 && f.substr(f.size() - 3) == "000")
      f.resize(f.size() - 3);  // 3, 6 or 9 digits
    out += f;
  }
  return out + "Z";
}

}  // namespace hutch::api::e2b
