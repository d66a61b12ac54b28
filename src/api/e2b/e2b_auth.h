// Who may use the E2B dialect. The control plane authenticates with
// X-API-Key against hutch's own keys; the E2B SDK insists on keys shaped
// `e2b_<hex>`, so `e2b_<hex>` also stands for hutch's generated key
// `hk_<hex>` (and `e2b_<key>` for any operator key). envd calls carry the
// sandbox's access token (X-Access-Token); it and the ports' traffic token
// are derived in src/auth/sandbox_token.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hutch::api::e2b {

// The hutch keys an X-API-Key value may stand for, most literal first.
std::vector<std::string> KeyCandidates(std::string_view presented);
// The user of "Authorization: Basic base64(user:)"; "" if absent/malformed.
std::string BasicAuthUser(std::string_view authorization);

}  // namespace hutch::api::e2b
