// Domain-name patterns of a sandbox's network policy ("example.com",
// "*.example.com") and how a queried name matches them.
//
// Rules (docs/security.md "Domain rules"):
// - Comparison is case-insensitive and ignores one trailing dot.
// - "example.com" matches exactly that name, not its subdomains.
// - "*.example.com" matches every name strictly below example.com, at any
//   depth (a.example.com, a.b.example.com) but NOT the apex example.com:
//   list both to allow both. A '*' anywhere else is not a pattern.
// Pure functions, no state: usable from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hutch::net {

// Lowercases `name` and drops one trailing dot. Returns nullopt when it is
// not a plain host name: empty labels, a label over 63 bytes, a name over
// 253 bytes, or a byte outside [a-z0-9-_] (the root "." gives "").
std::optional<std::string> NormalizeDomainName(std::string_view name);

// Validates a pattern given by a user (an exact name or "*." + name) and
// returns its normalized form; kInvalidRequest with the reason otherwise.
Result<std::string> NormalizeDomainPattern(std::string_view pattern);

// Whether a normalized name matches a normalized pattern.
bool DomainPatternMatches(std::string_view pattern, std::string_view name);

}  // namespace hutch::net
