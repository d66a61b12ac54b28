// Who a request speaks for, once a credential is accepted: the key's hash
// (its rate-limit bucket and its log name), its role and the owner id it
// creates under.
//
// Two roles (issue 32 #13). An admin key sees and touches everything, as
// every key did before roles. A tenant key sees and touches only what was
// created under its owner id — sandboxes, snapshots, volumes and the
// templates it built — and gets `404` for anything else, so one tenant
// cannot even learn another's ids exist. Keys of one named tenant share its
// owner id, which is what lets a tenant rotate its key: add the new key,
// move clients over, revoke the old one, with the sandboxes still its own.
#pragma once

#include <string>
#include <vector>

namespace hutch::auth {

enum class Role { kAdmin, kTenant };

const char* RoleName(Role r);
// "admin" or "tenant"; false for anything else.
bool ParseRole(const std::string& s, Role* out);

// An accepted key as configured (keys file, stored keys).
struct KeyEntry {
  std::string hash;    // SHA-256 hex of the key
  std::string tenant;  // the tenant name, "" for a key that is its own owner
  Role role = Role::kAdmin;
  std::string label;  // the operator's note (stored keys)
  // The MCP tools this key may call (issue 25); empty: all of them.
  std::vector<std::string> mcp_tools;

  // The id recorded as the owner of what this key creates: "t:<tenant>"
  // for a named tenant, else the key's hash (what every owner field held
  // before tenants, so existing sandboxes stay their key's own).
  std::string OwnerId() const { return tenant.empty() ? hash : "t:" + tenant; }
};

// A tenant name: [a-z0-9][a-z0-9._-]{0,62}.
bool ValidTenantName(const std::string& name);

struct Principal {
  std::string key_hash;
  std::string owner;  // KeyEntry::OwnerId()
  Role role = Role::kAdmin;
  std::vector<std::string> mcp_tools;  // KeyEntry::mcp_tools

  bool empty() const { return key_hash.empty(); }
  bool admin() const { return role == Role::kAdmin; }
  // Whether this principal may see and touch something owned by `owner_id`.
  bool Owns(const std::string& owner_id) const { return admin() || owner_id == owner; }
  // The owner restriction to apply to lists and lookups: "" for an admin
  // (no restriction), else this principal's owner id.
  std::string Scope() const { return admin() ? std::string() : owner; }
  // Whether this key may call the MCP tool `name`.
  bool MayCallTool(const std::string& name) const;
};

}  // namespace hutch::auth
