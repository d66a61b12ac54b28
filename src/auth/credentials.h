// Who may call hutchd, in one place for every dialect and the port proxy:
// the accepted API keys (kept as SHA-256 hex only, compared in constant
// time), the bearer form of a key, and the per-key rate limit that every
// request spends, whichever dialect or credential it came through.
// I/O thread only, like the router that owns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/rate_limiter.h"

namespace hutch::auth {

// Constant-time comparison of two secrets (or their hashes): the time
// taken does not depend on where they differ.
bool SecretEquals(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header value ("" when
// the value has another form).
std::string BearerToken(std::string_view authorization);

class Credentials {
 public:
  // `key_hashes`: SHA-256 hex of each accepted key. rate <= 0 turns the
  // rate limit off (RateLimiter).
  Credentials(std::vector<std::string> key_hashes, double rate_per_second, double burst)
      : key_hashes_(std::move(key_hashes)), limiter_(rate_per_second, burst) {}

  // Replaces the accepted keys (SIGHUP reload).
  void SetKeyHashes(std::vector<std::string> hashes) { key_hashes_ = std::move(hashes); }
  // The hash of `presented` if it is an accepted key, else "".
  std::string MatchKey(std::string_view presented) const;
  // The hash of the first of `candidates` that is an accepted key, else ""
  // (every candidate is compared, so the time does not say which matched).
  std::string MatchAnyKey(const std::vector<std::string>& candidates) const;
  // The hash of the key of an "Authorization: Bearer <key>" header value
  // if it is accepted, else "".
  std::string MatchBearer(std::string_view authorization) const {
    return MatchKey(BearerToken(authorization));
  }

  // Spends one request of the key hashed `key_hash` (a caller's own key,
  // or the owner's key of the sandbox a per-sandbox token opened): 0 when
  // allowed, else the whole seconds to wait (at least 1, for Retry-After).
  int Charge(const std::string& key_hash);
  // Keys with a partly used bucket (the metric hutch_rate_limit_buckets).
  size_t rate_limit_buckets() const { return limiter_.bucket_count(); }

 private:
  std::vector<std::string> key_hashes_;
  RateLimiter limiter_;
};

}  // namespace hutch::auth
