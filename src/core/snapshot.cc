#include "core/snapshot.h"

namespace hutch {

nlohmann::json SnapshotRecord::ToJson() const {
  nlohmann::json j{{"id", id},
                   {"sandbox_id", sandbox_id},
                   {"template", template_name},
                   {"status", "ready"},
                   {"created_at", FormatRfc3339(created_at)},
                   {"size_bytes", size_bytes},
                   {"memory", false}};
  if (!name.empty()) j["name"] = name;
  return j;
}

std::string SnapshotRecord::ToStoreJson() const {
  nlohmann::json j = {{"id", id},
                      {"sandbox_id", sandbox_id},
                      {"owner", owner},
                      {"template", template_name},
                      {"layers", layers},
                      {"rootfs", rootfs},
                      {"created_at_ms", ToUnixMs(created_at)},
                      {"size_bytes", size_bytes},
                      {"internal", internal},
                      {"deleted", deleted},
                      {"name", name}};
  return j.dump();
}

bool SnapshotRecord::FromStoreJson(const std::string& text, SnapshotRecord* out) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    SnapshotRecord r;
    r.id = j.at("id").get<std::string>();
    r.sandbox_id = j.at("sandbox_id").get<std::string>();
    r.owner = j.value("owner", "");
    r.template_name = j.at("template").get<std::string>();
    r.layers = j.at("layers").get<std::vector<std::string>>();
    r.rootfs = j.value("rootfs", "");
    r.created_at = FromUnixMs(j.at("created_at_ms").get<int64_t>());
    r.size_bytes = j.value("size_bytes", uint64_t{0});
    r.internal = j.value("internal", false);
    r.deleted = j.value("deleted", false);
    r.name = j.value("name", "");
    if (r.layers.empty()) return false;
    *out = std::move(r);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace hutch
