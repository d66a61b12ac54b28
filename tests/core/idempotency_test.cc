// Idempotency-Key semantics of CreateIdempotent, and the cache's expiry.
#include <gtest/gtest.h>

#include "core/idempotency.h"
#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

TEST_F(CoreTest, SameKeySameBodyIsTheSameSandbox) {
  CreateOptions o;
  o.owner_key = "owner1";
  bool replayed = true;
  auto a = Run(mgr->CreateIdempotent(o, "k", "{\"a\":1}", &replayed));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(replayed);
  auto b = Run(mgr->CreateIdempotent(o, "k", "{\"a\":1}", &replayed));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(replayed);
  EXPECT_EQ(a->id, b->id);
  EXPECT_EQ(driver->created, 1);
  // The key is scoped by the API key: another owner's same key is new.
  CreateOptions other = o;
  other.owner_key = "owner2";
  auto c = Run(mgr->CreateIdempotent(other, "k", "{\"a\":1}", &replayed));
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(replayed);
  EXPECT_NE(c->id, a->id);
}

TEST_F(CoreTest, SameKeyOtherBodyIsAConflict) {
  bool replayed = false;
  ASSERT_TRUE(Run(mgr->CreateIdempotent({}, "k", "{\"a\":1}", &replayed)).ok());
  auto b = Run(mgr->CreateIdempotent({}, "k", "{\"a\":2}", &replayed));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Code::kConflict);
  EXPECT_EQ(driver->created, 1);
}

TEST_F(CoreTest, RetryWhileTheFirstIsStartingWaitsForIt) {
  driver->hold_creates = true;
  std::optional<Result<SandboxRecord>> first, second;
  bool r1 = false, r2 = false;
  const std::string key = "k", body = "b";
  Spawn(mgr->CreateIdempotent({}, key, body, &r1), &first);
  Poll();
  Spawn(mgr->CreateIdempotent({}, key, body, &r2), &second);
  Sleep(std::chrono::milliseconds(50));
  EXPECT_FALSE(second.has_value());
  driver->hold_creates = false;
  while (!first || !second) Poll();
  ASSERT_TRUE(first->ok());
  ASSERT_TRUE(second->ok());
  EXPECT_EQ((*first)->id, (*second)->id);
  EXPECT_FALSE(r1);
  EXPECT_TRUE(r2);
  EXPECT_EQ(driver->creates, 1);
}

TEST_F(CoreTest, KeySurvivesARestart) {
  bool replayed = false;
  auto a = Run(mgr->CreateIdempotent({}, "k", "b", &replayed));
  ASSERT_TRUE(a.ok());
  Restart();
  auto b = Run(mgr->CreateIdempotent({}, "k", "b", &replayed));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(replayed);
  EXPECT_EQ(a->id, b->id);
}

TEST_F(CoreTest, KeyWhoseSandboxIsForgottenIsAConflict) {
  opts.tombstone_ttl = std::chrono::seconds(0);
  Restart();
  bool replayed = false;
  auto a = Run(mgr->CreateIdempotent({}, "k", "b", &replayed));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(Run(mgr->Delete(a->id)).ok());
  Run(mgr->reaper().Tick());  // the tombstone is past its TTL: forgotten
  ASSERT_FALSE(mgr->Get(a->id).ok());
  auto b = Run(mgr->CreateIdempotent({}, "k", "b", &replayed));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Code::kConflict);
}

TEST(IdempotencyCacheTest, RecordsExpire) {
  IdempotencyCache c(std::chrono::seconds(60));
  EXPECT_EQ(c.Claim("s", "k", "body").state, IdempotencyCache::State::kNew);
  EXPECT_EQ(c.Claim("s", "k", "body").state, IdempotencyCache::State::kPending);
  ASSERT_TRUE(c.Complete("s", "k", "sb_1").ok());
  auto l = c.Claim("s", "k", "body");
  EXPECT_EQ(l.state, IdempotencyCache::State::kDone);
  EXPECT_EQ(l.sandbox_id, "sb_1");
  EXPECT_EQ(c.Claim("s", "k", "other").state, IdempotencyCache::State::kMismatch);
  c.Prune(std::chrono::system_clock::now());
  EXPECT_EQ(c.size(), 1u);  // not yet
  c.Prune(std::chrono::system_clock::now() + std::chrono::seconds(61));
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.Claim("s", "k", "other").state, IdempotencyCache::State::kNew);
  c.Abandon("s", "k");
  EXPECT_EQ(c.Claim("s", "k", "body").state, IdempotencyCache::State::kNew);
}

}  // namespace
}  // namespace hutch::testing
