// The keys hutchd accepts, from wherever the operator keeps them: the
// HUTCH_API_KEY variable or a keys file (the operator's list; edit and
// SIGHUP to rotate), else the keys stored in state.db (made by
// `hutchd --new-key`, the first start, or the admin keys API), which hold
// only hashes. Each key has a role and may name a tenant
// (auth/principal.h).
//
// A line of the keys file, and an entry of HUTCH_API_KEY (comma
// separated), is `KEY [tenant=NAME] [role=admin|tenant]`; naming a tenant
// makes the key a tenant key unless role=admin says otherwise. A bare key
// is an admin key, as every key was before roles.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "auth/principal.h"
#include "common/result.h"
#include "store/state_store.h"

namespace hutch::server {

// Parses one entry (`KEY [tenant=NAME] [role=R]`).
Result<auth::KeyEntry> ParseKeyEntry(const std::string& entry);

// Whether the operator lists the keys (HUTCH_API_KEY or --keys-file): then
// the stored keys are not used, and the keys API cannot add any.
bool OperatorListsKeys(const std::string& keys_file);

// The accepted keys: the operator's if any, else the stored ones; on the
// very first start (allow_generate) an admin key is generated, stored as
// its hash and printed once.
Result<std::vector<auth::KeyEntry>> LoadKeys(const std::string& keys_file, store::StateStore* db,
                                             bool allow_generate);

// Makes a key ("hk_" + 40 hex), stores its hash with its tenant and role,
// and returns it: the one time anyone sees it.
Result<std::string> NewStoredKey(store::StateStore* db, const std::string& label,
                                 const std::string& tenant, auth::Role role);

// Removes the stored key whose hash starts with `prefix` (12 or more hex
// characters, matching exactly one key). A running hutchd drops it at its
// next SIGHUP.
Status RevokeStoredKey(store::StateStore* db, const std::string& prefix);
// Writes the stored keys, one line each: hash prefix, tenant, role, label.
Status PrintStoredKeys(store::StateStore* db, std::ostream& out);

}  // namespace hutch::server
