// auth::PtyTickets: the single-use terminal tickets (issue, redeem once,
// expiry, sandbox binding, the bound on outstanding tickets), with time
// passed in.
#include "auth/pty_tickets.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace {

using hutch::auth::PtyTickets;
using std::chrono::seconds;

const PtyTickets::Clock::time_point kT0{seconds(1000)};

std::string Issue(PtyTickets& t, const std::string& key, const std::string& sb,
                  PtyTickets::Clock::time_point now = kT0) {
  return t.Issue(key, sb, now);
}

TEST(PtyTickets, RedeemsOnceForItsSandbox) {
  PtyTickets t;
  const std::string ticket = Issue(t, "keyhash", "sb_a");
  EXPECT_TRUE(std::regex_match(ticket, std::regex("pt_[0-9a-f]{64}"))) << ticket;
  auto who = t.Redeem(ticket, "sb_a", kT0 + seconds(1));
  ASSERT_TRUE(who.has_value());
  EXPECT_EQ(*who, "keyhash");
  EXPECT_FALSE(t.Redeem(ticket, "sb_a", kT0 + seconds(1)).has_value());
  EXPECT_EQ(t.outstanding(), 0u);
}

TEST(PtyTickets, WrongSandboxSpendsTheTicket) {
  PtyTickets t;
  const std::string ticket = Issue(t, "keyhash", "sb_a");
  EXPECT_FALSE(t.Redeem(ticket, "sb_b", kT0).has_value());
  EXPECT_FALSE(t.Redeem(ticket, "sb_a", kT0).has_value());
}

TEST(PtyTickets, ExpiresAfterItsTtl) {
  PtyTickets t(seconds(30));
  const std::string a = Issue(t, "k", "sb_a");
  const std::string b = Issue(t, "k", "sb_a");
  EXPECT_TRUE(t.Redeem(a, "sb_a", kT0 + seconds(29)).has_value());
  EXPECT_FALSE(t.Redeem(b, "sb_a", kT0 + seconds(30)).has_value());
}

TEST(PtyTickets, UnknownAndEmptyTicketsAreRefused) {
  PtyTickets t;
  Issue(t, "k", "sb_a");
  EXPECT_FALSE(t.Redeem("", "sb_a", kT0).has_value());
  EXPECT_FALSE(t.Redeem("pt_0000", "sb_a", kT0).has_value());
  EXPECT_FALSE(t.Redeem("keyhash", "sb_a", kT0).has_value());
}

TEST(PtyTickets, TicketsAreDistinct) {
  PtyTickets t;
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) seen.insert(Issue(t, "k", "sb_a"));
  EXPECT_EQ(seen.size(), 200u);
}

TEST(PtyTickets, ExpiredAreSweptAndTheOldestGivesWayAtTheBound) {
  PtyTickets t(seconds(30), 3);
  Issue(t, "k", "sb_a");
  Issue(t, "k", "sb_a");
  EXPECT_EQ(t.outstanding(), 2u);
  // Both expired by the next issue: swept.
  const std::string c = Issue(t, "k", "sb_a", kT0 + seconds(60));
  EXPECT_EQ(t.outstanding(), 1u);
  const std::string d = Issue(t, "k", "sb_a", kT0 + seconds(60));
  const std::string e = Issue(t, "k", "sb_a", kT0 + seconds(60));
  const std::string f = Issue(t, "k", "sb_a", kT0 + seconds(60));  // c gives way
  EXPECT_EQ(t.outstanding(), 3u);
  EXPECT_FALSE(t.Redeem(c, "sb_a", kT0 + seconds(61)).has_value());
  EXPECT_TRUE(t.Redeem(d, "sb_a", kT0 + seconds(61)).has_value());
  EXPECT_TRUE(t.Redeem(f, "sb_a", kT0 + seconds(61)).has_value());
  EXPECT_TRUE(t.Redeem(e, "sb_a", kT0 + seconds(61)).has_value());
}

}  // namespace
