// Per-sandbox credentials: a token that opens one sandbox's in-sandbox
// APIs (E2B's envd, its exposed ports, OpenSandbox's execd) and nothing
// else. An HMAC-SHA-256 under the server secret (server_secret.h) of the
// kind, the sandbox's owner id and the sandbox id: nothing extra is
// stored, a token survives a restart of hutchd, and a copy of state.db
// alone (which holds owners and ids, never the secret) mints none
// (issue 32 #13). A request a token opens spends the owner's rate limit
// (Credentials::Charge).
#pragma once

#include <string>
#include <string_view>

namespace hutch::auth {

enum class SandboxTokenKind {
  kE2bEnvd,           // X-Access-Token (E2B's envdAccessToken)
  kE2bTraffic,        // e2b-traffic-access-token: the sandbox's ports only
  kOpenSandboxExecd,  // X-EXECD-ACCESS-TOKEN (OpenSandbox's endpoint headers)
};

// The token of `kind` for sandbox `id` owned by `owner`, keyed by
// `secret`. The one place tokens are derived: the SDK tests hold these
// bytes, so any change happens here.
std::string SandboxToken(SandboxTokenKind kind, std::string_view secret, const std::string& owner,
                         const std::string& id);
// Whether `presented` is that token (constant time; an empty one never is).
bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view secret, std::string_view presented,
                         const std::string& owner, const std::string& id);

}  // namespace hutch::auth
