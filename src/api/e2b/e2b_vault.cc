#include "api/e2b/e2b_vault.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace hutch::api::e2b {

namespace {

using Json = nlohmann::json;

Error Invalid(const std::string& msg) { return MakeError(Code::kInvalidRequest, msg); }

// A host's headers, the later rule's value winning.
Result<std::map<std::string, std::string>> HostHeaders(const std::string& host, const Json& rules) {
  const std::string what = "'network.rules." + host + "'";
  if (!rules.is_array()) return Invalid(what + " must be an array of rules");
  std::map<std::string, std::string> out;
  for (const auto& rule : rules) {
    if (!rule.is_object()) return Invalid(what + ": a rule must be an object {transform}");
    for (const auto& [k, v] : rule.items())
      if (k != "transform")
        return MakeError(Code::kNotSupported, what + ": '" + k + "' is not supported");
    const Json& t = rule.value("transform", Json::object());
    if (!t.is_object()) return Invalid(what + ": 'transform' must be an object {headers}");
    for (const auto& [k, v] : t.items())
      if (k != "headers")
        return MakeError(Code::kNotSupported, what + ": transform '" + k + "' is not supported");
    const Json& headers = t.value("headers", Json::object());
    if (!headers.is_object()) return Invalid(what + ": 'headers' must be an object");
    // (A value is a secret: no error quotes one.)
    for (const auto& [name, value] : headers.items()) {
      if (!value.is_string()) return Invalid(what + ": header " + name + " must be a string");
      out[name] = value.get<std::string>();
    }
  }
  return out;
}

// Exact names first, then wildcards, longer (narrower) ones first.
bool Before(const std::string& a, const std::string& b) {
  const bool wa = a.rfind("*.", 0) == 0, wb = b.rfind("*.", 0) == 0;
  if (wa != wb) return !wa;
  if (a.size() != b.size()) return a.size() > b.size();
  return a < b;
}

}  // namespace

Result<std::optional<vault::Vault>> E2bRulesVault(const Json* network) {
  if (!network || !network->is_object()) return std::optional<vault::Vault>();
  auto it = network->find("rules");
  if (it == network->end() || it->is_null()) return std::optional<vault::Vault>();
  if (!it->is_object()) return Invalid("'network.rules' must be an object of host: [rules]");
  std::vector<std::string> hosts;
  for (const auto& [host, rules] : it->items()) hosts.push_back(host);
  // (Three digits keep the group names in order.)
  if (hosts.size() > 999) return Invalid("'network.rules' may name at most 999 hosts");
  std::sort(hosts.begin(), hosts.end(), Before);
  vault::Vault v;
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto headers = HostHeaders(hosts[i], (*it)[hosts[i]]);
    if (!headers.ok()) return headers.error();
    // Names sort in the precedence order: the proxy takes the first group
    // (by name) a request matches.
    const std::string n = std::to_string(i);
    const std::string group = "e2b-" + std::string(3 - n.size(), '0') + n;
    size_t j = 0;
    for (const auto& [name, value] : *headers) {
      const std::string member = group + "." + std::to_string(j++);
      auto c = vault::ParseCredential({{"name", member}, {"value", value}}, {});
      if (!c.ok()) return c.error().Context("'network.rules." + hosts[i] + "' header " + name);
      auto b = vault::ParseBinding(
          {{"name", member},
           {"group", group},
           {"match", {{"host", hosts[i]}}},
           {"auth", {{"type", "header"}, {"credential", member}, {"header", name}}}});
      if (!b.ok()) return b.error().Context("'network.rules." + hosts[i] + "'");
      v.credentials.emplace(member, std::move(c).value());
      v.bindings.emplace(member, std::move(b).value());
    }
  }
  return std::optional<vault::Vault>(std::move(v));
}

}  // namespace hutch::api::e2b
