#include "auth/sandbox_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth/credentials.h"

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
  const std::string msg = std::string(Label(kind)) + "\n" + owner + "\n" + id;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &len) == nullptr)
    return {};
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view secret, std::string_view presented,
                         const std::string& owner, const std::string& id) {
  const std::string want = SandboxToken(kind, secret, owner, id);
  return !presented.empty() && !want.empty() && SecretEquals(presented, want);
}

}  // namespace hutch::auth
