// ConnectionBudget's decisions without sockets: which unauthenticated
// connection makes room for a newcomer, and that authenticated ones never
// do (the HTTP side is tests/security/connections_test.cc).
#include "http/connection_budget.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

using hutch::api::ConnectionBudget;
using hutch::api::ConnectionLimits;
using hutch::api::EvictReason;
using hutch::api::SourceKey;

namespace {

ConnectionLimits Limits(size_t max, size_t unauth, size_t per_source) {
  ConnectionLimits l;
  l.max_connections = max;
  l.max_unauthenticated = unauth;
  l.max_unauthenticated_per_source = per_source;
  return l;
}

}  // namespace

TEST(ConnectionBudget, ASourceAtItsLimitMakesRoomAmongItsOwnOldest) {
  ConnectionBudget b(Limits(100, 100, 2));
  auto a1 = b.Admit("a");
  auto a2 = b.Admit("a");
  auto other = b.Admit("b");
  auto a3 = b.Admit("a");
  ASSERT_TRUE(a3.admitted);
  ASSERT_EQ(a3.evicted.size(), 1u);
  EXPECT_EQ(a3.evicted[0].first, a1.id);
  EXPECT_EQ(a3.evicted[0].second, EvictReason::kSource);
  EXPECT_FALSE(b.Contains(a1.id));
  EXPECT_TRUE(b.Contains(a2.id));
  EXPECT_TRUE(b.Contains(other.id));
  EXPECT_EQ(b.UnauthenticatedFrom("a"), 2u);
  // An authenticated connection no longer counts against its source.
  b.Authenticate(a2.id);
  auto a4 = b.Admit("a");
  EXPECT_TRUE(a4.evicted.empty());
  EXPECT_EQ(b.open(), 4u);
}

TEST(ConnectionBudget, TheUnauthenticatedBudgetEvictsTheOldestOfAnySource) {
  ConnectionBudget b(Limits(100, 3, 10));
  auto x = b.Admit("x");
  auto y = b.Admit("y");
  b.Admit("z");
  auto w = b.Admit("w");
  ASSERT_EQ(w.evicted.size(), 1u);
  EXPECT_EQ(w.evicted[0].first, x.id);
  EXPECT_EQ(w.evicted[0].second, EvictReason::kBudget);
  EXPECT_EQ(b.unauthenticated(), 3u);
  EXPECT_TRUE(b.Contains(y.id));
}

TEST(ConnectionBudget, AtTheCapANewcomerReplacesTheOldestUnauthenticatedOrIsRefused) {
  ConnectionBudget b(Limits(3, 3, 3));
  auto k1 = b.Admit("k");
  auto u1 = b.Admit("u");
  auto k2 = b.Admit("k");
  b.Authenticate(k1.id);
  b.Authenticate(k2.id);
  auto n = b.Admit("n");
  ASSERT_TRUE(n.admitted);
  ASSERT_EQ(n.evicted.size(), 1u);
  EXPECT_EQ(n.evicted[0].first, u1.id);
  EXPECT_EQ(n.evicted[0].second, EvictReason::kCapacity);
  // Every open connection authenticated: the next one is refused, and
  // nobody is closed for it.
  b.Authenticate(n.id);
  auto refused = b.Admit("n");
  EXPECT_FALSE(refused.admitted);
  EXPECT_TRUE(refused.evicted.empty());
  EXPECT_EQ(b.open(), 3u);
  // Removing an evicted or unknown id is harmless; a real close frees room.
  b.Remove(u1.id);
  b.Remove(12345);
  b.Remove(k1.id);
  EXPECT_TRUE(b.Admit("n").admitted);
}

TEST(ConnectionBudget, BooksBalanceAfterEveryConnectionCloses) {
  ConnectionBudget b(Limits(10, 5, 2));
  std::vector<ConnectionBudget::Id> ids;
  for (int i = 0; i < 40; ++i) {
    auto a = b.Admit(std::to_string(i % 3));
    if (a.admitted) ids.push_back(a.id);
    if (i % 4 == 0 && a.admitted) b.Authenticate(a.id);
  }
  for (auto id : ids) b.Remove(id);
  EXPECT_EQ(b.open(), 0u);
  EXPECT_EQ(b.unauthenticated(), 0u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(b.UnauthenticatedFrom(std::to_string(s)), 0u);
}

TEST(SourceKey, Ipv4IsTheAddressAndIpv6ItsSlash64) {
  using boost::asio::ip::make_address;
  EXPECT_EQ(SourceKey(make_address("127.0.0.2")), "127.0.0.2");
  EXPECT_EQ(SourceKey(make_address("::ffff:10.1.2.3")), "10.1.2.3");
  EXPECT_EQ(SourceKey(make_address("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
  EXPECT_EQ(SourceKey(make_address("2001:db8:1:2:bbbb::9")),
            SourceKey(make_address("2001:db8:1:2::1")));
}
