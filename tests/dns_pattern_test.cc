#include <gtest/gtest.h>

#include "net/dns_pattern.h"
#include "net/dns_policy.h"

using namespace hutch::net;

TEST(DnsPattern, ExactMatchesOnlyThatNameCaseAndDotBlind) {
  auto n = NormalizeDomainName("Example.COM.");
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, "example.com");
  EXPECT_TRUE(DomainPatternMatches("example.com", *n));
  EXPECT_FALSE(DomainPatternMatches("example.com", "a.example.com"));
}

TEST(DnsPattern, WildcardMatchesSubdomainsNotApex) {
  EXPECT_TRUE(DomainPatternMatches("*.example.com", "a.example.com"));
  EXPECT_TRUE(DomainPatternMatches("*.example.com", "a.b.example.com"));
  EXPECT_FALSE(DomainPatternMatches("*.example.com", "example.com"));
  EXPECT_FALSE(DomainPatternMatches("*.example.com", "badexample.com"));
}

TEST(DnsPattern, RejectsBadNamesAndPatterns) {
  EXPECT_FALSE(NormalizeDomainName("a..b"));
  EXPECT_FALSE(NormalizeDomainName("a b.com"));
  EXPECT_FALSE(NormalizeDomainName(std::string(64, 'a') + ".com"));
  EXPECT_FALSE(NormalizeDomainPattern("a.*.com").ok());
  EXPECT_FALSE(NormalizeDomainPattern("*").ok());
  auto p = NormalizeDomainPattern("*.Example.com.");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "*.example.com");
}

TEST(DnsPolicy, DenyBeatsAllowThenDefault) {
  DnsPolicy p;
  p.allow = {"*.Example.com"};
  p.deny = {"bad.example.com."};
  EXPECT_TRUE(DnsPolicyAllows(p, "a.example.com"));
  EXPECT_FALSE(DnsPolicyAllows(p, "bad.example.com"));
  EXPECT_FALSE(DnsPolicyAllows(p, "other.test"));
  p.default_allow = true;
  EXPECT_TRUE(DnsPolicyAllows(p, "other.test"));
  DnsPolicy all;
  all.allow_all = true;
  all.deny = {"x.test"};
  EXPECT_TRUE(DnsPolicyAllows(all, "x.test"));
}
