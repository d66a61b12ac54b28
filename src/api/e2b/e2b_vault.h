// E2B's per-domain egress rules (`network.rules` at create and on
// `PUT /sandboxes/{id}/network`: {"api.example.com": [{"transform":
// {"headers": {"Authorization": "Bearer ..."}}}]}) as a hutch credential
// vault (core/vault.h): each header value is a credential, sealed at rest
// and added by the egress proxy to HTTPS requests for the host; the
// sandbox never holds it. docs/compat-e2b.md "Egress header rules".
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/vault.h"

namespace hutch::api::e2b {

// The vault `rules` describes (nullopt when `network` has no rules). Each
// host's rules apply in order, a later header replacing an earlier one of
// the same name; a host's headers form one group (its rules are not merged
// with a wildcard's): exact names first, then wildcards longest first, the
// first group a request matches wins, as E2B orders them.
Result<std::optional<vault::Vault>> E2bRulesVault(const nlohmann::json* network);

}  // namespace hutch::api::e2b
