// Per-sandbox credentials: a token that opens one sandbox's in-sandbox
// APIs (E2B's envd, its exposed ports, OpenSandbox's execd) and nothing
// else. Derived from the owner key's hash and the sandbox id, so nothing
// extra is stored and a token survives a restart of hutchd. A request a
// token opens spends the owner key's rate limit (Credentials::Charge).
#pragma once

#include <string>
#include <string_view>

namespace hutch::auth {

enum class SandboxTokenKind {
  kE2bEnvd,           // X-Access-Token (E2B's envdAccessToken)
  kE2bTraffic,        // e2b-traffic-access-token: the sandbox's ports only
  kOpenSandboxExecd,  // X-EXECD-ACCESS-TOKEN (OpenSandbox's endpoint headers)
};

// The token of `kind` for sandbox `id` owned by the key hashed
// `owner_key_hash`. The one place tokens are derived: the SDK tests hold
// these bytes, so any change (a server secret mixed in) happens here.
std::string SandboxToken(SandboxTokenKind kind, const std::string& owner_key_hash,
                         const std::string& id);
// Whether `presented` is that token (constant time; an empty one never is).
bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view presented,
                         const std::string& owner_key_hash, const std::string& id);

}  // namespace hutch::auth
