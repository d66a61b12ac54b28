#include "auth/principal.h"

namespace hutch::auth {

const char* RoleName(Role r) { return r == Role::kAdmin ? "admin" : "tenant"; }

bool ParseRole(const std::string& s, Role* out) {
  if (s == "admin") {
    *out = Role::kAdmin;
    return true;
  }
  if (s == "tenant") {
    *out = Role::kTenant;
    return true;
  }
  return false;
}

bool Principal::MayCallTool(const std::string& name) const {
  if (mcp_tools.empty()) return true;
  for (const auto& t : mcp_tools)
    if (t == name) return true;
  return false;
}

bool ValidTenantName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

}  // namespace hutch::auth
