// The seam between OpenSandbox's networkPolicy / egress sidecar and
// hutch's networking. Today every hutch sandbox has loopback only (no
// network namespace link), so the one policy hutch can honestly honour is
// "deny everything"; anything else is not_supported. When hutch's egress
// policy lands (branch `net`), these functions are where OpenSandbox's
// {defaultAction, egress:[{action,target}]} is mapped onto it, and where
// the sidecar's GET/PATCH/DELETE /policy read and change it.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/sandbox.h"

namespace hutch::api::opensandbox {

// A create's networkPolicy (null/absent: OpenSandbox's default). Accepts
// what hutch does anyway: absent, or defaultAction "deny" with no allow
// rules. Anything that would open egress is not_supported.
Status CheckNetworkPolicy(const nlohmann::json& policy);

// The sandbox's real policy in the egress sidecar's shape:
// {status, mode, enforcementMode, policy:{defaultAction, egress}}.
nlohmann::json EgressPolicyOf(const SandboxRecord& rec);

// PATCH /policy (rules) and DELETE /policy (targets): not_supported until
// hutch has a network to apply them to.
Status ApplyEgressChange(const SandboxRecord& rec, const nlohmann::json& change);

}  // namespace hutch::api::opensandbox
