#include "core/sandbox.h"

namespace hutch {

const char* StatusName(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::kStarting:
      return "starting";
    case SandboxStatus::kRunning:
      return "running";
    case SandboxStatus::kPaused:
      return "paused";
    case SandboxStatus::kStopped:
      return "stopped";
    case SandboxStatus::kFailed:
      return "failed";
  }
  return "failed";
}

bool ParseStatus(const std::string& s, SandboxStatus* out) {
  for (auto st : {SandboxStatus::kStarting, SandboxStatus::kRunning, SandboxStatus::kPaused,
                  SandboxStatus::kStopped, SandboxStatus::kFailed}) {
    if (s == StatusName(st)) {
      *out = st;
      return true;
    }
  }
  return false;
}

nlohmann::json SandboxRecord::ToJson() const {
  nlohmann::json j = {
      {"id", id},
      {"template", template_name},
      {"status", StatusName(status)},
      {"created_at", FormatRfc3339(created_at)},
      {"expires_at", FormatRfc3339(expires_at)},
      {"metadata", metadata},
      {"cpu", cpu},
      {"memory_mb", memory_mb},
      {"disk_mb", disk_mb},
      {"driver", driver},
  };
  if (!reason.empty()) j["reason"] = reason;
  if (!snapshot.empty()) j["snapshot"] = snapshot;
  if (!volumes.empty()) j["volumes"] = VolumeMountsToJson(volumes);
  if (auto_pause_seconds > 0) j["auto_pause_seconds"] = auto_pause_seconds;
  if (pause_on_expiry) j["pause_on_expiry"] = true;
  j["network"] = network.ToJson();
  if (status == SandboxStatus::kPaused) j["paused_by"] = auto_paused ? "idle" : "api";
  if (!boot.empty()) j["boot"] = boot;
  return j;
}

std::string SandboxRecord::ToStoreJson() const {
  nlohmann::json j = {
      {"id", id},
      {"template", template_name},
      {"status", StatusName(status)},
      {"reason", reason},
      {"created_at_ms", ToUnixMs(created_at)},
      {"expires_at_ms", ToUnixMs(expires_at)},
      {"metadata", metadata},
      {"env", env},
      {"cpu", cpu},
      {"memory_mb", memory_mb},
      {"disk_mb", disk_mb},
      {"driver", driver},
      {"owner_key", owner_key},
      {"snapshot", snapshot},
      {"layers", layers},
      {"rootfs", rootfs},
      {"user", user},
      {"workdir", workdir},
      {"volumes", VolumeMountsToJson(volumes)},
      {"auto_pause_seconds", auto_pause_seconds},
      {"auto_paused", auto_paused},
      {"pause_on_expiry", pause_on_expiry},
      {"network", network.ToJson()},
      {"net_slot", net_slot},
      {"boot", boot},
  };
  // Metadata and env values are client strings that may hold invalid UTF-8
  // only if the API let them in; replace rather than throw if so.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool SandboxRecord::FromStoreJson(const std::string& text, SandboxRecord* out) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  try {
    SandboxRecord r;
    r.id = j.at("id").get<std::string>();
    r.template_name = j.at("template").get<std::string>();
    if (!ParseStatus(j.at("status").get<std::string>(), &r.status)) return false;
    r.reason = j.value("reason", "");
    r.created_at = FromUnixMs(j.at("created_at_ms").get<int64_t>());
    r.expires_at = FromUnixMs(j.at("expires_at_ms").get<int64_t>());
    r.metadata = j.value("metadata", std::map<std::string, std::string>{});
    r.env = j.value("env", std::map<std::string, std::string>{});
    r.cpu = j.at("cpu").get<double>();
    r.memory_mb = j.at("memory_mb").get<int64_t>();
    r.disk_mb = j.at("disk_mb").get<int64_t>();
    r.driver = j.value("driver", "");
    r.owner_key = j.value("owner_key", "");
    r.snapshot = j.value("snapshot", "");
    r.layers = j.value("layers", std::vector<std::string>{});
    r.rootfs = j.value("rootfs", "");
    r.user = j.value("user", "");
    r.workdir = j.value("workdir", "");
    if (auto v = j.find("volumes"); v != j.end()) r.volumes = VolumeMountsFromJson(*v);
    r.auto_pause_seconds = j.value("auto_pause_seconds", int64_t{0});
    r.auto_paused = j.value("auto_paused", false);
    r.pause_on_expiry = j.value("pause_on_expiry", false);
    if (auto n = j.find("network"); n != j.end() && !net::PolicyFromStoreJson(*n, &r.network))
      return false;
    r.net_slot = j.value("net_slot", -1);
    r.boot = j.value("boot", "");
    *out = std::move(r);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace hutch
