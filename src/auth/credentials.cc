#include "auth/credentials.h"

#include <algorithm>
#include <cctype>

#include "common/sha256.h"

namespace hutch::auth {

bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::string BearerToken(std::string_view auth) {
  const std::string_view prefix = "Bearer ";
  if (auth.size() <= prefix.size()) return {};
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(auth[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return {};
  return std::string(auth.substr(prefix.size()));
}

Principal Credentials::MatchKey(std::string_view presented) const {
  if (presented.empty()) return {};
  return MatchAnyKey({std::string(presented)});
}

Principal Credentials::MatchAnyKey(const std::vector<std::string>& candidates) const {
  // Compared as hashes: equal-length strings, and no key in memory.
  Principal found;
  for (const auto& c : candidates) {
    if (c.empty()) continue;
    std::string hash = Sha256Hex(c);
    const KeyEntry* match = nullptr;
    for (const auto& k : keys_)
      if (SecretEquals(k.hash, hash) && match == nullptr) match = &k;
    if (match != nullptr && found.empty())
      found = {match->hash, match->OwnerId(), match->role, match->mcp_tools};
  }
  return found;
}

Principal Credentials::MatchKeyHash(std::string_view hash) const {
  for (const auto& k : keys_)
    if (SecretEquals(k.hash, hash)) return {k.hash, k.OwnerId(), k.role, k.mcp_tools};
  return {};
}

int Credentials::Charge(const std::string& owner) {
  auto d = limiter_.Take(limiter_.KeyId(owner), RateLimiter::Clock::now());
  return d.allowed ? 0 : std::max(1, static_cast<int>(d.retry_after_seconds));
}

}  // namespace hutch::auth
