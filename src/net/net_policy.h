// A sandbox's egress policy: what `network` says at create and what
// GET/PUT /v1/sandboxes/{id}/network read and replace. A plain value: the
// parsing and matching rules live here, the enforcement in nft_ruleset and
// NetworkManager, the name checks in the DNS proxy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch::net {

enum class NetMode { kNone, kAll, kPolicy };
const char* NetModeName(NetMode m);

// An IPv4 network, host bits zero.
struct Cidr {
  uint32_t addr = 0;  // host byte order
  int prefix = 32;
  std::string ToString() const;
  bool Contains(uint32_t a) const;
  bool operator==(const Cidr& o) const { return addr == o.addr && prefix == o.prefix; }
};

struct NetworkPolicy {
  NetMode mode = NetMode::kNone;
  bool default_allow = false;  // mode policy only
  std::vector<Cidr> allow_cidrs, deny_cidrs;
  // Lower-case names without a trailing dot; "*.example.com" stands for
  // every name below example.com (not example.com itself).
  std::vector<std::string> allow_domains, deny_domains;
  // Non-public addresses (host byte order) this sandbox alone may reach
  // despite the always-blocked ranges: hutch's own use (a template build
  // reaching the host's apt mirror when that resolves to a private or
  // reserved address). Never read from the API, never stored: only
  // sandboxes that do not outlive hutchd get them.
  std::vector<uint32_t> private_hosts;

  bool has_domain_rules() const { return !allow_domains.empty() || !deny_domains.empty(); }
  nlohmann::json ToJson() const;
};

// One allow/deny entry: an IPv4 CIDR (a single address is a /32) or a
// domain name with an optional leading "*." wildcard.
struct RuleEntry {
  std::optional<Cidr> cidr;  // set for an address rule
  std::string domain;        // normalized, for a domain rule
  // The canonical spelling ("10.0.0.1/32", "*.example.com"): two entries
  // are the same rule exactly when these are equal.
  std::string ToString() const { return cidr ? cidr->ToString() : domain; }
};
// Errors are invalid_request naming the entry; IPv6 is not_supported.
Result<RuleEntry> ParseRuleEntry(const std::string& s);

// Strict reader of the API's `network` object: {"mode":"none"|"all"} or
// {"mode":"policy","default":"allow"|"deny","allow":[...],"deny":[...]};
// entries are IPv4 CIDRs (or single addresses) and domain names with an
// optional leading "*." wildcard. Errors are invalid_request naming the
// entry; IPv6 entries are not_supported (IPv6 is always blocked).
Result<NetworkPolicy> ParseNetworkPolicy(const nlohmann::json& j);
// Reads back what ToJson wrote (the state store); false if malformed.
bool PolicyFromStoreJson(const nlohmann::json& j, NetworkPolicy* out);

Result<Cidr> ParseCidr(const std::string& s);
// A dotted IPv4 address; false if `s` is not one.
bool ParseIpv4(const std::string& s, uint32_t* out);
std::string Ipv4ToString(uint32_t a);

}  // namespace hutch::net
