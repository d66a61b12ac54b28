// Who may call hutchd, in one place for every dialect and the port proxy:
// the accepted API keys (kept as SHA-256 hex only, compared in constant
// time) with their roles and tenants, the bearer form of a key, the
// per-sandbox tokens (derived with the server secret), and the per-owner
// rate limit that every request spends, whichever dialect or credential it
// came through. I/O thread only, like the router that owns it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "auth/principal.h"
#include "auth/sandbox_token.h"
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
  // `server_secret`: the bytes every per-sandbox token is derived with
  // (server_secret.h). rate <= 0 turns the rate limit off (RateLimiter).
  Credentials(std::vector<KeyEntry> keys, std::string server_secret, double rate_per_second,
              double burst)
      : keys_(std::move(keys)),
        secret_(std::move(server_secret)),
        limiter_(rate_per_second, burst) {}

  // Replaces the accepted keys (SIGHUP reload, the keys API): a revoked
  // key stops working at its next request, without a restart.
  void SetKeys(std::vector<KeyEntry> keys) { keys_ = std::move(keys); }
  const std::vector<KeyEntry>& keys() const { return keys_; }

  // The principal of `presented` if it is an accepted key, else an empty one.
  Principal MatchKey(std::string_view presented) const;
  // The principal of the first of `candidates` that is an accepted key
  // (every candidate is compared, so the time does not say which matched).
  Principal MatchAnyKey(const std::vector<std::string>& candidates) const;
  // The principal of the accepted key whose SHA-256 hex is `hash` (a key
  // remembered by hash, such as a terminal ticket's), else an empty one.
  Principal MatchKeyHash(std::string_view hash) const;
  // The principal of an "Authorization: Bearer <key>" header value.
  Principal MatchBearer(std::string_view authorization) const {
    return MatchKey(BearerToken(authorization));
  }

  // The per-sandbox token of `kind` for sandbox `id` owned by `owner`.
  std::string SandboxToken(SandboxTokenKind kind, const std::string& owner,
                           const std::string& id) const {
    return auth::SandboxToken(kind, secret_, owner, id);
  }
  bool SandboxTokenMatches(SandboxTokenKind kind, std::string_view presented,
                           const std::string& owner, const std::string& id) const {
    return auth::SandboxTokenMatches(kind, secret_, presented, owner, id);
  }

  // Spends one request of the bucket `owner` (a principal's owner id, or
  // the owner of the sandbox a per-sandbox token opened): 0 when allowed,
  // else the whole seconds to wait (at least 1, for Retry-After).
  int Charge(const std::string& owner);
  // Owners with a partly used bucket (the metric hutch_rate_limit_buckets).
  size_t rate_limit_buckets() const { return limiter_.bucket_count(); }

 private:
  std::vector<KeyEntry> keys_;
  std::string secret_;
  RateLimiter limiter_;
};

}  // namespace hutch::auth
