// OpenSandbox's egress policy ({defaultAction, egress:[{action,target}]},
// at create as `networkPolicy` and on the egress sidecar's /policy) mapped
// onto hutch's NetworkPolicy, both ways. Pure functions: the handlers read
// the sandbox's policy, compute the new one here and apply it with
// SandboxManager::SetNetworkPolicy.
//
// The two models differ in one point: OpenSandbox evaluates rules in list
// order (first match wins), hutch lets a deny rule win over an allow rule.
// Policies read back from hutch list every deny rule first, so reading
// them in OpenSandbox's order gives what hutch enforces; a policy sent
// with an allow rule before a deny rule that also matches is enforced as
// deny (docs/compat-opensandbox.md).
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/sandbox.h"
#include "net/net_policy.h"

namespace hutch::api::opensandbox {

// A create's networkPolicy. Absent/null: an OpenSandbox sandbox without a
// policy has unrestricted egress, so mode all (mode none when this hutchd
// has no networking, as the E2B dialect does). Present: mode policy, its
// defaultAction (absent: deny) as the default and the rules split into
// allow/deny lists -- mode policy even for deny-all, so that the sandbox
// has an interface the sidecar's PATCH can open later. Without networking
// a policy that allows nothing becomes mode none; one that allows
// something is refused by SandboxManager::Create (not_supported, saying
// why networking is off).
Result<net::NetworkPolicy> CreateNetworkPolicy(const nlohmann::json& policy, bool networking);

// The egress sidecar's GET /policy answer for a sandbox:
// {status:"ok", mode: deny_all|allow_all|enforcing, enforcementMode,
//  policy:{defaultAction, egress:[deny rules..., allow rules...]}}.
nlohmann::json EgressPolicyOf(const SandboxRecord& rec);

// PATCH /policy: `rules` ([{action,target}]) merged into `cur` as the
// sidecar does -- an incoming rule replaces an existing rule for the same
// target, the first incoming rule for a target wins, defaultAction stays.
// Returns `cur` itself when nothing changes.
Result<net::NetworkPolicy> PatchEgressRules(const net::NetworkPolicy& cur,
                                            const nlohmann::json& rules);

// DELETE /policy: the rules for `targets` (["example.com", ...]) removed;
// targets without a rule are ignored; defaultAction stays. Returns `cur`
// itself when nothing changes.
Result<net::NetworkPolicy> DeleteEgressRules(const net::NetworkPolicy& cur,
                                             const nlohmann::json& targets);

}  // namespace hutch::api::opensandbox
