#include "server/api_keys.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/clock.h"
#include "common/sha256.h"

namespace hutch::server {

namespace {

std::string Trim(std::string k) {
  while (!k.empty() && isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
  size_t b = 0;
  while (b < k.size() && isspace(static_cast<unsigned char>(k[b]))) ++b;
  return k.substr(b);
}

// Non-empty, non-comment entries of `s` split at `sep`.
std::vector<std::string> SplitEntries(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string k;
  while (std::getline(ss, k, sep)) {
    k = Trim(k);
    if (!k.empty() && k[0] != '#') out.push_back(k);
  }
  return out;
}

// The operator's entries: HUTCH_API_KEY (comma-separated), else the lines
// of `keys_file`. Empty when neither is set.
Result<std::vector<std::string>> OperatorEntries(const std::string& keys_file) {
  if (const char* env = getenv("HUTCH_API_KEY"); env && *env) {
    auto keys = SplitEntries(env, ',');
    if (!keys.empty()) return keys;
  }
  if (keys_file.empty()) return std::vector<std::string>{};
  std::ifstream in(keys_file);
  if (!in) return MakeError(Code::kInvalidRequest, "cannot read keys file " + keys_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto keys = SplitEntries(ss.str(), '\n');
  if (keys.empty())
    return MakeError(Code::kInvalidRequest, "keys file " + keys_file + " holds no key");
  return keys;
}

}  // namespace

Result<auth::KeyEntry> ParseKeyEntry(const std::string& entry) {
  std::stringstream ss(entry);
  std::string key, word;
  ss >> key;
  if (key.empty()) return MakeError(Code::kInvalidRequest, "empty key entry");
  auth::KeyEntry e;
  e.hash = Sha256Hex(key);
  bool role_given = false;
  while (ss >> word) {
    const size_t eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
    // (The key itself never goes into a message: the entry is named by
    // its attributes only.)
    if (name == "tenant") {
      if (!auth::ValidTenantName(value))
        return MakeError(Code::kInvalidRequest,
                         "key entry: tenant \"" + value + "\" is not [a-z0-9][a-z0-9._-]{0,62}");
      e.tenant = value;
    } else if (name == "role") {
      if (!auth::ParseRole(value, &e.role))
        return MakeError(Code::kInvalidRequest,
                         "key entry: role must be admin or tenant, not \"" + value + "\"");
      role_given = true;
    } else if (name == "mcp_tools") {
      // A comma-separated list of tool names (docs/mcp.md); the names are
      // checked where the tools are known (an unknown one matches nothing).
      std::stringstream tools(value);
      for (std::string t; std::getline(tools, t, ',');)
        if (!t.empty()) e.mcp_tools.push_back(t);
      if (e.mcp_tools.empty())
        return MakeError(Code::kInvalidRequest, "key entry: mcp_tools= needs tool names");
    } else {
      return MakeError(Code::kInvalidRequest,
                       "key entry: unknown attribute \"" + name +
                           "\" (KEY [tenant=NAME] [role=admin|tenant] [mcp_tools=a,b])");
    }
  }
  if (!e.tenant.empty() && !role_given) e.role = auth::Role::kTenant;
  if (e.tenant.empty() && e.role == auth::Role::kTenant)
    return MakeError(Code::kInvalidRequest, "key entry: role=tenant needs tenant=NAME");
  return e;
}

bool OperatorListsKeys(const std::string& keys_file) {
  const char* env = getenv("HUTCH_API_KEY");
  return (env && *env && !SplitEntries(env, ',').empty()) || !keys_file.empty();
}

Result<std::string> NewStoredKey(store::StateStore* db, const std::string& label,
                                 const std::string& tenant, auth::Role role) {
  std::string key = "hk_" + RandomHex(20);
  store::ApiKeyRow row;
  row.hash = Sha256Hex(key);
  row.label = label;
  row.tenant = tenant;
  row.role = auth::RoleName(role);
  if (auto st = db->AddApiKey(row); !st.ok()) return st.error();
  return key;
}

Result<std::vector<auth::KeyEntry>> LoadKeys(const std::string& keys_file, store::StateStore* db,
                                             bool allow_generate) {
  auto entries = OperatorEntries(keys_file);
  if (!entries.ok()) return entries.error();
  std::vector<auth::KeyEntry> keys;
  for (size_t i = 0; i < entries->size(); ++i) {
    auto e = ParseKeyEntry((*entries)[i]);
    if (!e.ok()) return e.error().Context("key " + std::to_string(i + 1));
    keys.push_back(std::move(*e));
  }
  if (!keys.empty()) return keys;
  auto stored = db->LoadApiKeys();
  if (!stored.ok()) return stored.error();
  for (const auto& row : *stored) {
    auth::KeyEntry e;
    e.hash = row.hash;
    e.tenant = row.tenant;
    e.label = row.label;
    if (!auth::ParseRole(row.role, &e.role)) e.role = auth::Role::kTenant;  // least power
    keys.push_back(std::move(e));
  }
  if (!keys.empty() || !allow_generate) return keys;
  auto key = NewStoredKey(db, "generated at first start", "", auth::Role::kAdmin);
  if (!key.ok()) return key.error();
  std::cout << "hutchd: generated an API key. It is shown only this once (the state dir keeps only "
               "its hash):\n  "
            << *key << "\n(make another with: hutchd --state-dir DIR --new-key)" << std::endl;
  auth::KeyEntry e;
  e.hash = Sha256Hex(*key);
  e.label = "generated at first start";
  return std::vector<auth::KeyEntry>{e};
}

Status RevokeStoredKey(store::StateStore* db, const std::string& prefix) {
  if (prefix.size() < 12 || prefix.find_first_not_of("0123456789abcdef") != std::string::npos)
    return MakeError(Code::kInvalidRequest,
                     "--revoke-key takes 12 or more lowercase hex characters of a key's hash "
                     "(see --list-keys)");
  auto rows = db->LoadApiKeys();
  if (!rows.ok()) return rows.error();
  std::vector<std::string> hits;
  for (const auto& r : *rows)
    if (r.hash.rfind(prefix, 0) == 0) hits.push_back(r.hash);
  if (hits.empty()) return MakeError(Code::kNotFound, "no stored key's hash starts with " + prefix);
  if (hits.size() > 1)
    return MakeError(Code::kInvalidRequest, "more than one stored key matches " + prefix);
  return db->DeleteApiKey(hits[0]);
}

Status PrintStoredKeys(store::StateStore* db, std::ostream& out) {
  auto rows = db->LoadApiKeys();
  if (!rows.ok()) return rows.error();
  for (const auto& r : *rows)
    out << r.hash.substr(0, 16) << "  " << (r.tenant.empty() ? "-" : r.tenant) << "  "
        << (r.role.empty() ? "admin" : r.role) << "  " << r.label << "\n";
  return Status{};
}

}  // namespace hutch::server
