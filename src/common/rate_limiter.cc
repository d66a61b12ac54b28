#include "common/rate_limiter.h"

#include <sys/random.h>

#include <algorithm>
#include <cmath>

namespace hutch {

namespace {
constexpr auto kSweepInterval = std::chrono::seconds(30);

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace

RateLimiter::RateLimiter(double rate_per_second, double burst)
    : rate_(rate_per_second), burst_(std::max(1.0, burst)), salt_(0) {
  // A per-process salt: key ids mean nothing outside this process, so a
  // leaked id (a debugger, a core file) says nothing about the key.
  if (getrandom(&salt_, sizeof salt_, 0) != static_cast<ssize_t>(sizeof salt_))
    salt_ = 0x9e3779b97f4a7c15ull;
}

uint64_t RateLimiter::KeyId(std::string_view api_key) const {
  uint64_t h = 1469598103934665603ull ^ salt_;  // FNV-1a, salted
  for (unsigned char c : api_key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return Mix(h);
}

RateLimiter::Decision RateLimiter::Take(uint64_t key_id, Clock::time_point now) {
  if (!enabled()) return {};
  if (now >= next_sweep_) {
    Sweep(now);
    next_sweep_ = now + kSweepInterval;
  }
  auto [it, inserted] = buckets_.try_emplace(key_id, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!inserted && now > b.last) {
    double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(burst_, b.tokens + elapsed * rate_);
    b.last = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return {};
  }
  double wait = (1 - b.tokens) / rate_;
  return {false, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait)))};
}

void RateLimiter::Sweep(Clock::time_point now) {
  std::erase_if(buckets_, [&](const auto& kv) {
    const Bucket& b = kv.second;
    double elapsed = now > b.last ? std::chrono::duration<double>(now - b.last).count() : 0;
    return b.tokens + elapsed * rate_ >= burst_;
  });
}

}  // namespace hutch
