// The egress policy reader and the nftables scripts built from it. The
// scripts are checked by nft itself (`nft -c`: parse and validate against
// the kernel, change nothing) when running as root with nft installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "net/net_policy.h"
#include "net/nft_ruleset.h"
#include "net/non_public.h"

using hutch::Code;
using namespace hutch::net;
using nlohmann::json;

TEST(NetPolicy, ModesParse) {
  auto none = ParseNetworkPolicy(json{{"mode", "none"}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->mode, NetMode::kNone);
  auto all = ParseNetworkPolicy(json{{"mode", "all"}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->mode, NetMode::kAll);
  EXPECT_EQ(all->ToJson(), json({{"mode", "all"}}));
}

TEST(NetPolicy, PolicyRulesSplitIntoCidrsAndDomains) {
  auto p = ParseNetworkPolicy(json::parse(
      R"({"mode":"policy","default":"deny","allow":["10.1.0.0/16","api.example.com","*.Pkg.test."],"deny":["10.1.2.0/24","bad.pkg.test"]})"));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_FALSE(p->default_allow);
  ASSERT_EQ(p->allow_cidrs.size(), 1u);
  EXPECT_EQ(p->allow_cidrs[0].ToString(), "10.1.0.0/16");
  EXPECT_EQ(p->allow_domains, (std::vector<std::string>{"api.example.com", "*.pkg.test"}));
  ASSERT_EQ(p->deny_cidrs.size(), 1u);
  EXPECT_EQ(p->deny_cidrs[0].ToString(), "10.1.2.0/24");
  EXPECT_EQ(p->deny_domains, (std::vector<std::string>{"bad.pkg.test"}));
  // Round trip through the stored form.
  NetworkPolicy back;
  ASSERT_TRUE(PolicyFromStoreJson(p->ToJson(), &back));
  EXPECT_EQ(back.ToJson(), p->ToJson());
}

TEST(NetPolicy, RuleEntriesHaveOneCanonicalSpelling) {
  EXPECT_EQ(ParseRuleEntry("10.0.0.1")->ToString(), "10.0.0.1/32");
  EXPECT_EQ(ParseRuleEntry("10.0.0.0/8")->ToString(), "10.0.0.0/8");
  EXPECT_TRUE(ParseRuleEntry("10.0.0.0/8")->cidr.has_value());
  EXPECT_EQ(ParseRuleEntry("*.Example.COM.")->ToString(), "*.example.com");
  EXPECT_FALSE(ParseRuleEntry("*.Example.COM.")->cidr.has_value());
  EXPECT_EQ(ParseRuleEntry("10.0.0.1/8").error().code, Code::kInvalidRequest);
  EXPECT_EQ(ParseRuleEntry("::1").error().code, Code::kNotSupported);
  EXPECT_EQ(ParseRuleEntry("").error().code, Code::kInvalidRequest);
}

TEST(NetPolicy, BadInputIsAClearError) {
  struct Case {
    const char* body;
    Code code;
  } cases[] = {
      {R"({"mode":"open"})", Code::kInvalidRequest},
      {R"({"mode":1})", Code::kInvalidRequest},
      {R"({"mode":"all","allow":["1.2.3.4"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","default":"maybe"})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":"1.2.3.4"})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":[7]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["10.1.2.3/16"]})", Code::kInvalidRequest},  // host bits
      {R"({"mode":"policy","allow":["10.1.2.3/33"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["300.1.2.3"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["*.com"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["a.*.com"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["bad_-.x..y"]})", Code::kInvalidRequest},
      {R"({"mode":"policy","allow":["2001:db8::/32"]})", Code::kNotSupported},
      {R"({"mode":"policy","extra":true})", Code::kInvalidRequest},
      {R"([])", Code::kInvalidRequest},
  };
  for (const auto& c : cases) {
    auto p = ParseNetworkPolicy(json::parse(c.body));
    ASSERT_FALSE(p.ok()) << c.body;
    EXPECT_EQ(p.error().code, c.code) << c.body << ": " << p.error().message;
    EXPECT_FALSE(p.error().message.empty());
  }
}

TEST(NftRuleset, ScriptsNameTheSlotAndThePool) {
  NftNames n{"h123456"};
  Cidr pool{0x647d0000, 16};  // 100.125.0.0/16
  BaseTableOptions o;
  o.pool = pool;
  o.non_public = NonPublicNetworks({});
  std::string base = BaseTableScript(n, o);
  EXPECT_NE(base.find("inet hutch_h123456"), std::string::npos);
  EXPECT_NE(base.find("add element inet hutch_h123456 nonpublic { 10.0.0.0/8, "),
            std::string::npos);
  EXPECT_NE(base.find("ip daddr @nonpublic ip daddr != @privok iifname . ip daddr != @privslot "
                      "reject"),
            std::string::npos);
  EXPECT_NE(base.find("flush set inet hutch_h123456 privslot"), std::string::npos);
  EXPECT_EQ(base.find("add element inet hutch_h123456 privok"), std::string::npos);
  EXPECT_NE(base.find("add @ctcount { ip saddr ct count over 4096 }"), std::string::npos);
  EXPECT_NE(base.find("add @ctrate { ip saddr limit rate over 500/second burst 1000 packets }"),
            std::string::npos);
  EXPECT_NE(base.find("ip daddr 100.125.0.0/16 udp dport 53 notrack"), std::string::npos);
  o.max_connections = 0;
  o.new_connections_per_second = 0;
  std::string unlimited = BaseTableScript(n, o);
  EXPECT_EQ(unlimited.find("ct count"), std::string::npos);
  EXPECT_EQ(unlimited.find("limit rate"), std::string::npos);
  EXPECT_NE(base.find("169.254.0.0/16"), std::string::npos);
  EXPECT_NE(base.find("masquerade"), std::string::npos);
  auto p = ParseNetworkPolicy(
      json::parse(R"({"mode":"policy","allow":["10.0.0.0/8"],"deny":["10.9.0.0/16"]})"));
  ASSERT_TRUE(p.ok());
  std::string slot = SlotPolicyScript(n, 7, *p, true);
  EXPECT_NE(slot.find("\"h123456v7\" : jump s7"), std::string::npos);
  EXPECT_NE(slot.find("add element inet hutch_h123456 a7 { 10.0.0.0/8 }"), std::string::npos);
  EXPECT_NE(slot.find("flush set inet hutch_h123456 r7"), std::string::npos);
  EXPECT_EQ(slot.find("privslot"), std::string::npos);
  // A build sandbox's exceptions: keyed by its interface, taken back alone.
  p->private_hosts = {0xcb007150, 0xac1f0002};  // 203.0.113.80, 172.31.0.2
  slot = SlotPolicyScript(n, 7, *p, true);
  EXPECT_NE(slot.find("add element inet hutch_h123456 privslot { \"h123456v7\" . 203.0.113.80, "
                      "\"h123456v7\" . 172.31.0.2 }"),
            std::string::npos)
      << slot;
  EXPECT_EQ(PrivateHostsRemoveScript(n, 7, p->private_hosts),
            "delete element inet hutch_h123456 privslot { \"h123456v7\" . 203.0.113.80, "
            "\"h123456v7\" . 172.31.0.2 }\n");
  EXPECT_EQ(PrivateHostsRemoveScript(n, 7, {}), "");
}

// nft itself validates every script (check mode: nothing is applied).
TEST(NftRuleset, NftAcceptsTheScripts) {
  if (geteuid() != 0 || access("/usr/sbin/nft", X_OK) != 0) GTEST_SKIP() << "needs root and nft";
  NftNames n{"hq" + std::to_string(getpid() % 100000)};
  Cidr pool{0x647e0000, 24};  // 100.126.0.0/24
  BaseTableOptions o;
  o.pool = pool;
  o.non_public = NonPublicNetworks(HostNetworks(pool, n.prefix));
  o.allow_private = {Cidr{0xac1f0000, 16}};  // 172.31.0.0/16 allowed
  std::string script = BaseTableScript(n, o);
  for (
      const char* body :
      {R"({"mode":"none"})", R"({"mode":"all"})",
       R"({"mode":"policy","default":"allow","allow":["10.0.0.0/8","10.1.0.0/16"],"deny":["192.0.2.1"]})"}) {
    auto p = ParseNetworkPolicy(json::parse(body));
    ASSERT_TRUE(p.ok());
    p->private_hosts = {0xcb007150};
    script += SlotPolicyScript(n, 3, *p, true);
  }
  script += PrivateHostsRemoveScript(n, 3, {0xcb007150});
  script += ResolvedScript(n, 3, {0x0a000001, 0x0a000002}, 30);
  char path[] = "/tmp/nft-check-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << script;
  std::string cmd = std::string("/usr/sbin/nft -c -f ") + path + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (size_t k = fread(buf, 1, sizeof buf, f)) out.append(buf, k);
  int rc = pclose(f);
  unlink(path);
  EXPECT_EQ(rc, 0) << out << "\n" << script;
}

TEST(NonPublic, CoversPrivateSharedAndCloudFabricRangesAndTheHostsNetworks) {
  auto has = [](const std::vector<Cidr>& v, const char* a) {
    uint32_t x = 0;
    EXPECT_TRUE(ParseIpv4(a, &x));
    for (const auto& c : v)
      if (c.Contains(x)) return true;
    return false;
  };
  auto fixed = SpecialPurposeNetworks();
  for (const char* a :
       {"10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "100.100.100.200", "100.64.0.1",
        "168.63.129.16", "198.18.0.1", "192.0.2.1"})
    EXPECT_TRUE(has(fixed, a)) << a;
  for (const char* a : {"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "168.63.129.17"})
    EXPECT_FALSE(has(fixed, a)) << a;
  Cidr lan{0x0b000000, 24};  // 11.0.0.0/24, a host network on public space
  EXPECT_TRUE(has(NonPublicNetworks({lan}), "11.0.0.7"));
}
