#include "core/volume.h"

#include <set>

namespace hutch {

nlohmann::json VolumeRecord::ToJson() const {
  return {{"name", name}, {"size_mb", size_mb}, {"created_at", FormatRfc3339(created_at)}};
}

std::string VolumeRecord::ToStoreJson() const {
  nlohmann::json j = {{"name", name},
                      {"size_mb", size_mb},
                      {"created_at_ms", ToUnixMs(created_at)},
                      {"owner", owner}};
  return j.dump();
}

bool VolumeRecord::FromStoreJson(const std::string& text, VolumeRecord* out) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    VolumeRecord r;
    r.name = j.at("name").get<std::string>();
    r.size_mb = j.at("size_mb").get<int64_t>();
    r.created_at = FromUnixMs(j.at("created_at_ms").get<int64_t>());
    r.owner = j.value("owner", "");
    if (!CheckVolumeName(r.name).ok() || r.size_mb <= 0) return false;
    *out = std::move(r);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

Status CheckVolumeName(const std::string& name) {
  auto bad = [&] {
    return MakeError(
        Code::kInvalidRequest,
        "volume name must be 1-63 characters of a-z, 0-9, '_', '.', '-', starting with a letter or "
        "digit");
  };
  if (name.empty() || name.size() > 63) return bad();
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-'))) return bad();
  }
  return Status{};
}

Status CheckVolumeMountPath(const std::string& path) {
  auto bad = [&](const std::string& why) {
    return MakeError(Code::kInvalidRequest, "volume mount path '" + path + "' " + why);
  };
  if (path.size() > 1024) return bad("is longer than 1024 bytes");
  if (path.empty() || path[0] != '/') return bad("must be absolute");
  if (path == "/") return bad("cannot be the root");
  if (path.find('\0') != std::string::npos) return bad("contains NUL");
  size_t start = 1;
  std::string first;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string comp = path.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == "..")
      return bad("must be normalized (no empty, '.' or '..' components, no trailing '/')");
    if (first.empty()) first = comp;
    start = end + 1;
  }
  if (first == "proc" || first == "dev" || first == "sys") return bad("cannot be under /" + first);
  return Status{};
}

Status CheckVolumeMounts(const std::vector<VolumeMountRequest>& mounts) {
  std::set<std::string> paths;
  for (const auto& m : mounts) {
    if (auto st = CheckVolumeName(m.name); !st.ok()) return st;
    if (auto st = CheckVolumeMountPath(m.path); !st.ok()) return st;
    if (!paths.insert(m.path).second)
      return MakeError(Code::kInvalidRequest, "two volumes are mounted at " + m.path);
  }
  if (mounts.size() > 16) return MakeError(Code::kInvalidRequest, "at most 16 volumes per sandbox");
  return Status{};
}

nlohmann::json VolumeMountsToJson(const std::vector<VolumeMountRequest>& mounts) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : mounts)
    a.push_back({{"name", m.name}, {"path", m.path}, {"read_only", m.read_only}});
  return a;
}

std::vector<VolumeMountRequest> VolumeMountsFromJson(const nlohmann::json& j) {
  std::vector<VolumeMountRequest> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    // Records come from our own store, but a damaged row must not throw
    // out of recovery: an entry with a wrong-typed field is skipped.
    if (!e.is_object()) continue;
    auto name = e.find("name");
    auto path = e.find("path");
    auto ro = e.find("read_only");
    if (name == e.end() || !name->is_string() || path == e.end() || !path->is_string()) continue;
    if (ro != e.end() && !ro->is_boolean()) continue;
    out.push_back(
        {name->get<std::string>(), path->get<std::string>(), ro != e.end() && ro->get<bool>()});
  }
  return out;
}

}  // namespace hutch
