// Who may use the E2B dialect. The control plane authenticates with
// X-API-Key against hutch's own keys; the E2B SDK insists on keys shaped
// `e2b_<hex>`, so `e2b_<hex>` also stands for hutch's generated key
// `hk_<hex>` (and `e2b_<key>` for any operator key). envd calls carry the
// sandbox's access token (X-Access-Token), derived from its owner's key
// hash and its id, so nothing extra is stored and it survives restarts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hutch::api::e2b {

// The hutch keys an X-API-Key value may stand for, most literal first.
std::vector<std::string> KeyCandidates(std::string_view presented);
// The envd access token of sandbox `id` owned by the key whose SHA-256 hex
// is `owner_key_hash`.
std::string EnvdAccessToken(const std::string& owner_key_hash, const std::string& id);
// The token that opens the sandbox's exposed ports (getHost URLs) and
// nothing else: sent as `e2b-traffic-access-token`, as E2B's proxy wants
// it for sandboxes whose ports are not public. Derived like the envd token.
std::string TrafficAccessToken(const std::string& owner_key_hash, const std::string& id);
// Constant-time comparison of equal-length secrets.
bool SecretEquals(std::string_view a, std::string_view b);
// The user of "Authorization: Basic base64(user:)"; "" if absent/malformed.
std::string BasicAuthUser(std::string_view authorization);

}  // namespace hutch::api::e2b
