#include "auth/sandbox_token.h"

#include "auth/credentials.h"
#include "common/sha256.h"

namespace hutch::auth {

namespace {

// Each kind its own label, so one kind's token never opens another's door.
const char* Label(SandboxTokenKind kind) {
  switch (kind) {
    case SandboxTokenKind::kE2bEnvd:
      return "hutch-e2b-envd-access-token";
    case SandboxTokenKind::kE2bTraffic:
      return "hutch-e2b-traffic-access-token";
    case SandboxTokenKind::kOpenSandboxExecd:
      return "hutch-opensandbox-execd-access-token";
  }
  return "";
}

}  // namespace

std::string SandboxToken(SandboxTokenKind kind, const std::string& owner_key_hash,
                         const std::string& id) {
  return Sha256Hex(std::string(Label(kind)) + "\n" + owner_key_hash + "\n" + id);
}

bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view presented,
                         const std::string& owner_key_hash, const std::string& id) {
  return !presented.empty() && SecretEquals(presented, SandboxToken(kind, owner_key_hash, id));
}

}  // namespace hutch::auth
