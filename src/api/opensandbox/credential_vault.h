// OpenSandbox's Credential Vault (its egress sidecar's /credential-vault
// API and the lifecycle's server-routed copy of it) in hutch's terms: pure
// translations between its wire form and core/vault, so the handler
// (osb_vault.cc) only reads, translates and hands the result to the
// VaultBook. docs/compat-opensandbox.md "Credential vault".
//
// An OpenSandbox binding names lists (hosts, ports) and customHeaders
// several headers; hutch's binding names one host, one port and one
// header. So one OpenSandbox binding becomes a group of hutch bindings
// (vault::Binding::group = its name), one per host x port x header, named
// "<name>" when there is one and "<name>.<i>" otherwise; a request gets
// every header of the group it matches. Reads fold the group back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/vault.h"

namespace hutch::api::opensandbox {

// {"credentials":[...],"bindings":[...]}: POST /credential-vault.
Result<vault::Vault> ParseVaultCreate(const nlohmann::json& j);

// PATCH /credential-vault: {expectedRevision?, credentials?:{add,replace,
// delete}, bindings?:{add,replace,delete}} applied to `cur` as one change
// (the result is stored whole or not at all). A stale expectedRevision or
// an add of a name that exists is a conflict; a replace or delete of one
// that does not is not found.
Result<vault::Vault> ApplyVaultPatch(const vault::Vault& cur, const nlohmann::json& j);

// CredentialVaultState: {revision, credentials:[{name,sourceType,revision}],
// bindings:[{name,revision,match,auth:{type,name?}}]}. Never a value.
nlohmann::json VaultStateJson(const vault::Vault& v);
// One credential's or binding's metadata, or nullopt when there is none.
std::optional<nlohmann::json> CredentialMetadata(const vault::Vault& v, const std::string& name);
std::optional<nlohmann::json> BindingMetadata(const vault::Vault& v, const std::string& name);

}  // namespace hutch::api::opensandbox
