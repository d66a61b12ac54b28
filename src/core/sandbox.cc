#include "core/sandbox.h"

namespace hutch {

const char* StatusName(SandboxStatus s) {
  switch (s) {
    case SandboxStatus::kStarting: return "starting";
    case SandboxStatus::kRunning: return "running";
    case SandboxStatus::kPaused: return "paused";
    case SandboxStatus::kStopped: return "stopped";
    case SandboxStatus::kFailed: return "failed";
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
  return j;
}

}  // namespace hutch
