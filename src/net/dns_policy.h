// The part of a sandbox's network policy that the DNS proxy enforces:
// which names the sandbox may resolve. The net layer builds one per
// sandbox from its `network` object; the proxy asks for it per query.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hutch::net {

struct DnsPolicy {
  bool allow_all = false;      // network.mode == "all": every name resolves
  bool default_allow = false;  // network.default == "allow"
  // Patterns (see dns_pattern.h); invalid ones match nothing. Deny beats allow.
  std::vector<std::string> allow;
  std::vector<std::string> deny;
};

// Whether `name` (normalized, NormalizeDomainName) may be resolved:
// allow_all, else a deny match refuses, else an allow match allows, else
// the default.
bool DnsPolicyAllows(const DnsPolicy& policy, std::string_view name);

}  // namespace hutch::net
