#include "net/net_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace hutch::net {

namespace {

constexpr size_t kMaxEntries = 256;

uint32_t Mask(int prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }

bool ValidLabel(const std::string& l) {
  if (l.empty() || l.size() > 63 || l.front() == '-' || l.back() == '-') return false;
  for (unsigned char c : l)
    if (!(std::isalnum(c) || c == '-' || c == '_')) return false;
  return true;
}

// A domain rule: a name or "*." + a name, at least two labels after the
// wildcard (so "*.com" cannot open a whole TLD by accident: write it as a
// CIDR rule or use default allow).
Result<std::string> ParseDomain(const std::string& raw) {
  // Lower-case, one trailing dot dropped (names as they come on the wire).
  std::string s = raw;
  if (!s.empty() && s.back() == '.') s.pop_back();
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string rest = s;
  bool wild = false;
  if (rest.rfind("*.", 0) == 0) {
    wild = true;
    rest = rest.substr(2);
  }
  auto bad = [&](const std::string& why) {
    return MakeError(Code::kInvalidRequest,
                     "network rule '" + raw + "' is not a valid domain name (" + why + ")");
  };
  if (rest.empty() || rest.size() > 253) return bad("length");
  size_t labels = 0, start = 0;
  while (start <= rest.size()) {
    size_t dot = rest.find('.', start);
    std::string label =
        rest.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!ValidLabel(label))
      return bad(label.find('*') != std::string::npos ? "'*' only as a leading '*.'"
                                                      : "label '" + label + "'");
    ++labels;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (wild && labels < 2) return bad("a wildcard needs at least two labels after '*.'");
  return s;
}

bool LooksIpv6(const std::string& s) { return s.find(':') != std::string::npos; }

bool LooksIpv4(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isdigit(c) || c == '.' || c == '/';
  });
}

Status ParseRuleList(const nlohmann::json& j, const char* key, std::vector<Cidr>* cidrs,
                     std::vector<std::string>* domains) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status{};
  if (!it->is_array())
    return MakeError(Code::kInvalidRequest,
                     std::string("'network.") + key + "' must be an array of strings");
  if (it->size() > kMaxEntries)
    return MakeError(Code::kInvalidRequest, std::string("'network.") + key + "' holds more than " +
                                                std::to_string(kMaxEntries) + " entries");
  for (const auto& e : *it) {
    if (!e.is_string())
      return MakeError(Code::kInvalidRequest,
                       std::string("'network.") + key + "' must be an array of strings");
    auto r = ParseRuleEntry(e.get<std::string>());
    if (!r.ok()) return r.error();
    if (r->cidr) {
      if (std::find(cidrs->begin(), cidrs->end(), *r->cidr) == cidrs->end())
        cidrs->push_back(*r->cidr);
    } else if (std::find(domains->begin(), domains->end(), r->domain) == domains->end()) {
      domains->push_back(r->domain);
    }
  }
  return Status{};
}

}  // namespace

Result<RuleEntry> ParseRuleEntry(const std::string& s) {
  if (LooksIpv6(s))
    return MakeError(
        Code::kNotSupported,
        "network rule '" + s + "': IPv6 is always blocked for sandboxes; rules are IPv4");
  RuleEntry r;
  if (LooksIpv4(s)) {
    auto c = ParseCidr(s);
    if (!c.ok()) return c.error();
    r.cidr = *c;
  } else {
    auto d = ParseDomain(s);
    if (!d.ok()) return d.error();
    r.domain = std::move(d).value();
  }
  return r;
}

const char* NetModeName(NetMode m) {
  switch (m) {
    case NetMode::kNone:
      return "none";
    case NetMode::kAll:
      return "all";
    case NetMode::kPolicy:
      return "policy";
  }
  return "none";
}

std::string Ipv4ToString(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

bool ParseIpv4(const std::string& s, uint32_t* out) {
  in_addr a;
  if (s.empty() || s.size() > 15 || inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

std::string Cidr::ToString() const { return Ipv4ToString(addr) + "/" + std::to_string(prefix); }
bool Cidr::Contains(uint32_t a) const { return (a & Mask(prefix)) == addr; }

Result<Cidr> ParseCidr(const std::string& s) {
  auto bad = [&](const std::string& why) {
    return MakeError(Code::kInvalidRequest,
                     "network rule '" + s + "' is not a valid IPv4 CIDR (" + why + ")");
  };
  size_t slash = s.find('/');
  Cidr c;
  if (!ParseIpv4(s.substr(0, slash), &c.addr)) return bad("address");
  if (slash != std::string::npos) {
    const std::string p = s.substr(slash + 1);
    if (p.empty() || p.size() > 2 ||
        !std::all_of(p.begin(), p.end(), [](unsigned char ch) { return std::isdigit(ch); }))
      return bad("prefix length");
    c.prefix = std::stoi(p);
    if (c.prefix > 32) return bad("prefix length over 32");
  }
  if ((c.addr & Mask(c.prefix)) != c.addr)
    return bad("host bits set; the network is " +
               Cidr{c.addr & Mask(c.prefix), c.prefix}.ToString());
  return c;
}

nlohmann::json NetworkPolicy::ToJson() const {
  nlohmann::json j = {{"mode", NetModeName(mode)}};
  if (mode != NetMode::kPolicy) return j;
  j["default"] = default_allow ? "allow" : "deny";
  auto list = [](const std::vector<Cidr>& cs, const std::vector<std::string>& ds) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& c : cs) a.push_back(c.ToString());
    for (const auto& d : ds) a.push_back(d);
    return a;
  };
  j["allow"] = list(allow_cidrs, allow_domains);
  j["deny"] = list(deny_cidrs, deny_domains);
  return j;
}

Result<NetworkPolicy> ParseNetworkPolicy(const nlohmann::json& j) {
  if (!j.is_object()) return MakeError(Code::kInvalidRequest, "'network' must be an object");
  for (const auto& [k, v] : j.items()) {
    if (k != "mode" && k != "default" && k != "allow" && k != "deny")
      return MakeError(Code::kInvalidRequest,
                       "unknown field 'network." + k + "' (known: mode, default, allow, deny)");
  }
  NetworkPolicy p;
  auto m = j.find("mode");
  if (m != j.end() && !m->is_null()) {
    if (!m->is_string()) return MakeError(Code::kInvalidRequest, "'network.mode' must be a string");
    const std::string s = m->get<std::string>();
    if (s == "none") p.mode = NetMode::kNone;
    else if (s == "all") p.mode = NetMode::kAll;
    else if (s == "policy") p.mode = NetMode::kPolicy;
    else
      return MakeError(Code::kInvalidRequest,
                       "'network.mode' must be none, all or policy, not '" + s + "'");
  } else if (j.contains("allow") || j.contains("deny") || j.contains("default")) {
    p.mode = NetMode::kPolicy;  // rules without a mode mean a policy
  }
  const bool has_rules = j.contains("allow") || j.contains("deny") || j.contains("default");
  if (p.mode != NetMode::kPolicy) {
    if (has_rules)
      return MakeError(Code::kInvalidRequest,
                       std::string("'network.default/allow/deny' need mode 'policy', not '") +
                           NetModeName(p.mode) + "'");
    return p;
  }
  auto d = j.find("default");
  if (d != j.end() && !d->is_null()) {
    if (!d->is_string() || (d->get<std::string>() != "allow" && d->get<std::string>() != "deny"))
      return MakeError(Code::kInvalidRequest, "'network.default' must be \"allow\" or \"deny\"");
    p.default_allow = d->get<std::string>() == "allow";
  }
  if (auto st = ParseRuleList(j, "allow", &p.allow_cidrs, &p.allow_domains); !st.ok())
    return st.error();
  if (auto st = ParseRuleList(j, "deny", &p.deny_cidrs, &p.deny_domains); !st.ok())
    return st.error();
  return p;
}

bool PolicyFromStoreJson(const nlohmann::json& j, NetworkPolicy* out) {
  auto p = ParseNetworkPolicy(j);
  if (!p.ok()) return false;
  *out = std::move(p).value();
  return true;
}

}  // namespace hutch::net
