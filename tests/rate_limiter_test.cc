// Token buckets per key, driven by an explicit clock (no sleeping).
#include "common/rate_limiter.h"

#include "auth/rate_defaults.h"

#include <gtest/gtest.h>

using hutch::RateLimiter;
using namespace std::chrono_literals;

namespace {
const RateLimiter::Clock::time_point kT0 = RateLimiter::Clock::time_point(1000s);
}

TEST(RateLimiter, BurstThenRefusesWithRetryAfterFromTheBucket) {
  RateLimiter rl(/*rate=*/0.25, /*burst=*/3);  // one token every 4 s
  uint64_t k = rl.KeyId("key-a");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rl.Take(k, kT0).allowed) << i;
  auto d = rl.Take(k, kT0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_seconds, 4);
  d = rl.Take(k, kT0 + 2500ms);  // 0.625 token back: 1.5 s more, rounded up
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_seconds, 2);
  EXPECT_TRUE(rl.Take(k, kT0 + 4s).allowed);
  EXPECT_FALSE(rl.Take(k, kT0 + 4s).allowed);
}

TEST(RateLimiter, RetryAfterIsAtLeastOneSecond) {
  RateLimiter rl(100, 1);
  uint64_t k = rl.KeyId("k");
  EXPECT_TRUE(rl.Take(k, kT0).allowed);
  auto d = rl.Take(k, kT0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_seconds, 1);
}

TEST(RateLimiter, KeysHaveTheirOwnBuckets) {
  RateLimiter rl(1, 2);
  uint64_t a = rl.KeyId("key-a"), b = rl.KeyId("key-b");
  EXPECT_NE(a, b);
  EXPECT_EQ(a, rl.KeyId("key-a"));
  EXPECT_TRUE(rl.Take(a, kT0).allowed);
  EXPECT_TRUE(rl.Take(a, kT0).allowed);
  EXPECT_FALSE(rl.Take(a, kT0).allowed);
  EXPECT_TRUE(rl.Take(b, kT0).allowed);
}

TEST(RateLimiter, RefillNeverExceedsBurst) {
  RateLimiter rl(10, 2);
  uint64_t k = rl.KeyId("k");
  EXPECT_TRUE(rl.Take(k, kT0).allowed);
  // An hour idle refills to 2, not 36000.
  EXPECT_TRUE(rl.Take(k, kT0 + 1h).allowed);
  EXPECT_TRUE(rl.Take(k, kT0 + 1h).allowed);
  EXPECT_FALSE(rl.Take(k, kT0 + 1h).allowed);
}

TEST(RateLimiter, IdleBucketsAreDropped) {
  RateLimiter rl(1, 5);
  for (int i = 0; i < 1000; ++i) rl.Take(rl.KeyId("key-" + std::to_string(i)), kT0);
  EXPECT_EQ(rl.bucket_count(), 1000u);
  // Long after every bucket refilled, the next request sweeps them out.
  rl.Take(rl.KeyId("late"), kT0 + 10min);
  EXPECT_EQ(rl.bucket_count(), 1u);
}

TEST(RateLimiter, ZeroRateIsOff) {
  RateLimiter rl(0, 1);
  EXPECT_FALSE(rl.enabled());
  uint64_t k = rl.KeyId("k");
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(rl.Take(k, kT0).allowed);
  EXPECT_EQ(rl.bucket_count(), 0u);
}

// The default per-key policy (auth/rate_defaults.h): a fleet's burst of
// 200 creates from one key, and a round of calls to each sandbox right
// after, pass; a client that floods is refused, with a Retry-After.
TEST(RateLimiter, DefaultsLetAFleetBurstThroughAndStopAFlood) {
  RateLimiter rl(hutch::auth::kDefaultKeyRate, hutch::auth::kDefaultKeyBurst);
  uint64_t k = rl.KeyId("fleet-key");
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(rl.Take(k, kT0).allowed) << "create " << i;
  for (int i = 0; i < 600; ++i) EXPECT_TRUE(rl.Take(k, kT0 + 500ms).allowed) << "call " << i;
  // A flood: 5000 requests within one second from the same key.
  int refused = 0;
  int64_t retry_after = 0;
  for (int i = 0; i < 5000; ++i) {
    auto d = rl.Take(k, kT0 + 1s + std::chrono::microseconds(i * 200));
    if (!d.allowed) {
      ++refused;
      retry_after = d.retry_after_seconds;
    }
  }
  // What the bucket had left plus one second of refill, and no more.
  EXPECT_GE(refused, 5000 - 400 - static_cast<int>(hutch::auth::kDefaultKeyRate) - 1);
  EXPECT_GE(retry_after, 1);
}
