#include "net/dns_policy.h"

#include "net/dns_pattern.h"

namespace hutch::net {

namespace {
// Patterns are normalized again here (cheap: lists are short) so that a
// caller that forgot NormalizeDomainPattern still gets case-insensitive,
// trailing-dot-blind matching; an invalid pattern matches nothing.
bool AnyMatches(const std::vector<std::string>& patterns, std::string_view name) {
  for (const auto& p : patterns) {
    auto norm = NormalizeDomainPattern(p);
    if (norm.ok() && DomainPatternMatches(*norm, name)) return true;
  }
  return false;
}
}  // namespace

bool DnsPolicyAllows(const DnsPolicy& policy, std::string_view name) {
  if (policy.allow_all) return true;
  if (AnyMatches(policy.deny, name)) return false;
  if (AnyMatches(policy.allow, name)) return true;
  return policy.default_allow;
}

}  // namespace hutch::net
