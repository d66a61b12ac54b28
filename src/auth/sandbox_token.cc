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

std::string SandboxToken(SandboxTokenKind kind, std::string_view secret, const std::string& owner,
                         const std::string& id) {
  // Without a secret there is no token (never a guessable one).
  if (secret.empty()) return {};
  return HmacSha256Hex(secret, std::string(Label(kind)) + "\n" + owner + "\n" + id);
}

bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view secret, std::string_view presented,
                         const std::string& owner, const std::string& id) {
  const std::string want = SandboxToken(kind, secret, owner, id);
  return !presented.empty() && !want.empty() && SecretEquals(presented, want);
}

}  // namespace hutch::auth
