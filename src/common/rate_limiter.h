// A rate limit per key: one token bucket per key, refilled at `rate`
// tokens a second up to `burst`; an event takes one token. Used for API
// requests (per API key, auth/credentials) and DNS queries (per sandbox
// address, net/dns_proxy).
//
// Keys are identified by a salted hash (KeyId), so the limiter holds no
// secret and nothing it could log is one. A bucket that has refilled to
// `burst` is indistinguishable from a new one, so the periodic sweep drops
// it: the map only holds keys used within the last burst/rate seconds
// (plus one sweep interval); callers only let keys they know reach it
// (API keys that passed authentication, addresses of sandboxes). Time is passed in, so tests drive
// it without sleeping. I/O thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace hutch {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Decision {
    bool allowed = true;
    // When refused: whole seconds until a token is back (at least 1), for
    // the Retry-After header.
    int64_t retry_after_seconds = 0;
  };

  // rate <= 0 turns the limiter off (every request allowed). burst < 1 is
  // raised to 1: a bucket that can never hold a token would refuse all.
  RateLimiter(double rate_per_second, double burst);

  bool enabled() const { return rate_ > 0; }
  // A stable identity for an API key within this process.
  uint64_t KeyId(std::string_view api_key) const;
  // Takes a token from the key's bucket if it has one.
  Decision Take(uint64_t key_id, Clock::time_point now);
  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  void Sweep(Clock::time_point now);

  double rate_;
  double burst_;
  uint64_t salt_;
  std::unordered_map<uint64_t, Bucket> buckets_;
  Clock::time_point next_sweep_{};
};

}  // namespace hutch
