#include "api/opensandbox/network_policy.h"

#include <algorithm>

namespace hutch::api::opensandbox {

namespace {

using Json = nlohmann::json;

// One OpenSandbox rule, its target in hutch's canonical spelling.
struct Rule {
  bool allow = false;
  std::string target;
};

// A policy as OpenSandbox sees it: a default and rules in order.
struct OsbPolicy {
  bool default_allow = false;
  std::vector<Rule> rules;
};

Error Bad(const std::string& msg) { return MakeError(Code::kInvalidRequest, msg); }

Result<std::string> Target(const Json& t, const std::string& where) {
  if (!t.is_string()) return Bad("'" + where + "' must be a string");
  auto e = net::ParseRuleEntry(t.get<std::string>());
  if (!e.ok()) return e.error().Context(where);
  return e->ToString();
}

Result<bool> Action(const Json& a, const std::string& where) {
  if (!a.is_string() || (a.get<std::string>() != "allow" && a.get<std::string>() != "deny"))
    return Bad("'" + where + "' must be \"allow\" or \"deny\"");
  return a.get<std::string>() == "allow";
}

// [{action, target}, ...] with `where` naming the list in errors.
Result<std::vector<Rule>> ParseRules(const Json& j, const std::string& where) {
  if (!j.is_array()) return Bad("'" + where + "' must be an array of {action, target} rules");
  std::vector<Rule> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& r = j[i];
    if (!r.is_object()) return Bad("'" + at + "' must be an object {action, target}");
    for (const auto& [k, v] : r.items())
      if (k != "action" && k != "target")
        return Bad("unknown field '" + at + "." + k + "' (known: action, target)");
    if (!r.contains("action") || !r.contains("target"))
      return Bad("'" + at + "' needs both 'action' and 'target'");
    auto allow = Action(r["action"], at + ".action");
    if (!allow.ok()) return allow.error();
    auto target = Target(r["target"], at + ".target");
    if (!target.ok()) return target.error();
    out.push_back({*allow, std::move(target).value()});
  }
  return out;
}

// Incoming rules first; for a target named more than once, the first rule.
std::vector<Rule> Merge(const std::vector<Rule>& incoming, const std::vector<Rule>& existing) {
  std::vector<Rule> out;
  auto has = [&](const std::string& t) {
    return std::any_of(out.begin(), out.end(), [&](const Rule& r) { return r.target == t; });
  };
  for (const auto* list : {&incoming, &existing})
    for (const auto& r : *list)
      if (!has(r.target)) out.push_back(r);
  return out;
}

OsbPolicy FromHutch(const net::NetworkPolicy& p) {
  OsbPolicy o;
  if (p.mode != net::NetMode::kPolicy) {
    o.default_allow = p.mode == net::NetMode::kAll;
    return o;
  }
  o.default_allow = p.default_allow;
  // Deny rules first: read in OpenSandbox's first-match order they then
  // mean what hutch enforces (deny wins).
  for (const auto& c : p.deny_cidrs) o.rules.push_back({false, c.ToString()});
  for (const auto& d : p.deny_domains) o.rules.push_back({false, d});
  for (const auto& c : p.allow_cidrs) o.rules.push_back({true, c.ToString()});
  for (const auto& d : p.allow_domains) o.rules.push_back({true, d});
  return o;
}

// Always mode policy; net::ParseNetworkPolicy applies hutch's own limits
// (entries per list).
Result<net::NetworkPolicy> ToHutch(const OsbPolicy& o) {
  Json allow = Json::array(), deny = Json::array();
  for (const auto& r : o.rules) (r.allow ? allow : deny).push_back(r.target);
  const Json j = {{"mode", "policy"},
                  {"default", o.default_allow ? "allow" : "deny"},
                  {"allow", allow},
                  {"deny", deny}};
  return net::ParseNetworkPolicy(j);
}

bool SameRules(const std::vector<Rule>& a, const std::vector<Rule>& b) {
  auto key = [](const std::vector<Rule>& v) {
    std::vector<std::string> k;
    for (const auto& r : v) k.push_back((r.allow ? "+" : "-") + r.target);
    std::sort(k.begin(), k.end());
    return k;
  };
  return key(a) == key(b);
}

}  // namespace

Result<net::NetworkPolicy> CreateNetworkPolicy(const Json& policy, bool networking) {
  net::NetworkPolicy p;
  if (policy.is_null()) {
    p.mode = networking ? net::NetMode::kAll : net::NetMode::kNone;
    return p;
  }
  if (!policy.is_object()) return Bad("'networkPolicy' must be an object {defaultAction, egress}");
  for (const auto& [k, v] : policy.items())
    if (k != "defaultAction" && k != "egress")
      return Bad("unknown field 'networkPolicy." + k + "' (known: defaultAction, egress)");
  OsbPolicy o;
  if (auto d = policy.find("defaultAction"); d != policy.end() && !d->is_null()) {
    auto allow = Action(*d, "networkPolicy.defaultAction");
    if (!allow.ok()) return allow.error();
    o.default_allow = *allow;
  }
  if (auto e = policy.find("egress"); e != policy.end() && !e->is_null()) {
    auto rules = ParseRules(*e, "networkPolicy.egress");
    if (!rules.ok()) return rules.error();
    o.rules = Merge(*rules, {});
  }
  auto h = ToHutch(o);
  if (!h.ok()) return h.error().Context("networkPolicy");
  if (!networking && !h->default_allow && h->allow_cidrs.empty() && h->allow_domains.empty())
    return p;  // allows nothing: exactly what mode none (loopback only) gives
  return h;
}

Json EgressPolicyOf(const SandboxRecord& rec) {
  const OsbPolicy o = FromHutch(rec.network);
  Json egress = Json::array();
  for (const auto& r : o.rules)
    egress.push_back({{"action", r.allow ? "allow" : "deny"}, {"target", r.target}});
  // The sidecar's derived mode: no rules means the default decides alone.
  const char* mode = !o.rules.empty() ? "enforcing" : o.default_allow ? "allow_all" : "deny_all";
  // hutch enforces with its DNS proxy plus nftables (OpenSandbox's
  // "dns+nft"); a sandbox created with mode none has no interface at all.
  const char* enforcement = rec.net_slot >= 0 ? "dns+nft" : "loopback-only";
  return {{"status", "ok"},
          {"mode", mode},
          {"enforcementMode", enforcement},
          {"policy", {{"defaultAction", o.default_allow ? "allow" : "deny"}, {"egress", egress}}}};
}

Result<net::NetworkPolicy> PatchEgressRules(const net::NetworkPolicy& cur, const Json& rules) {
  auto incoming = ParseRules(rules, "rules");
  if (!incoming.ok()) return incoming.error();
  OsbPolicy o = FromHutch(cur);
  std::vector<Rule> merged = Merge(*incoming, o.rules);
  if (SameRules(merged, o.rules)) return cur;
  o.rules = std::move(merged);
  return ToHutch(o);
}

Result<net::NetworkPolicy> DeleteEgressRules(const net::NetworkPolicy& cur, const Json& targets) {
  if (!targets.is_array())
    return Bad("the body must be an array of targets ([\"example.com\", ...])");
  std::vector<std::string> drop;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto t = Target(targets[i], "targets[" + std::to_string(i) + "]");
    if (!t.ok()) return t.error();
    drop.push_back(std::move(t).value());
  }
  OsbPolicy o = FromHutch(cur);
  const size_t before = o.rules.size();
  std::erase_if(o.rules, [&](const Rule& r) {
    return std::find(drop.begin(), drop.end(), r.target) != drop.end();
  });
  if (o.rules.size() == before) return cur;
  return ToHutch(o);
}

}  // namespace hutch::api::opensandbox
