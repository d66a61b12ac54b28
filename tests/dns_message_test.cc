// The proxy's decisions on whole messages (parse -> decide -> reply).
#include <gtest/gtest.h>
#include <ldns/ldns.h>

#include "net/dns_message.h"

using namespace hutch::net;

namespace {

std::vector<uint8_t> Wire(ldns_pkt* p) {
  uint8_t* buf = nullptr;
  size_t n = 0;
  EXPECT_EQ(ldns_pkt2wire(&buf, p, &n), LDNS_STATUS_OK);
  std::vector<uint8_t> out(buf, buf + n);
  free(buf);
  ldns_pkt_free(p);
  return out;
}

std::vector<uint8_t> Query(const char* name, ldns_rr_type type, uint16_t id = 7) {
  ldns_pkt* p = nullptr;
  EXPECT_EQ(ldns_pkt_query_new_frm_str(&p, name, type, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
  ldns_pkt_set_id(p, id);
  return Wire(p);
}

ldns_pkt* Parse(const std::vector<uint8_t>& w) {
  ldns_pkt* p = nullptr;
  EXPECT_EQ(ldns_wire2pkt(&p, w.data(), w.size()), LDNS_STATUS_OK);
  return p;
}

DnsPolicy AllowOnly(const char* pattern) {
  DnsPolicy p;
  p.allow = {pattern};
  return p;
}

}  // namespace

TEST(DnsMessage, DeniedNameGetsNxdomain) {
  DnsPolicy p = AllowOnly("allowed.test");
  auto d = DecideDnsQuery(Query("denied.test.", LDNS_RR_TYPE_A), &p);
  ASSERT_EQ(d.kind, DnsDecision::kReply);
  ldns_pkt* r = Parse(d.reply);
  EXPECT_EQ(ldns_pkt_get_rcode(r), LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(ldns_pkt_id(r), 7);
  EXPECT_EQ(ldns_pkt_ancount(r), 0);
  ldns_pkt_free(r);
}

TEST(DnsMessage, UnknownClientRefused) {
  auto d = DecideDnsQuery(Query("allowed.test.", LDNS_RR_TYPE_A), nullptr);
  ASSERT_EQ(d.kind, DnsDecision::kReply);
  ldns_pkt* r = Parse(d.reply);
  EXPECT_EQ(ldns_pkt_get_rcode(r), LDNS_RCODE_REFUSED);
  ldns_pkt_free(r);
}

TEST(DnsMessage, AaaaOfAllowedNameIsEmptyNoerror) {
  DnsPolicy p = AllowOnly("allowed.test");
  auto d = DecideDnsQuery(Query("ALLOWED.test.", LDNS_RR_TYPE_AAAA), &p);
  ASSERT_EQ(d.kind, DnsDecision::kReply);
  ldns_pkt* r = Parse(d.reply);
  EXPECT_EQ(ldns_pkt_get_rcode(r), LDNS_RCODE_NOERROR);
  EXPECT_EQ(ldns_pkt_ancount(r), 0);
  ldns_pkt_free(r);
}

TEST(DnsMessage, MalformedAndResponsesDropped) {
  DnsPolicy p = AllowOnly("allowed.test");
  std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_EQ(DecideDnsQuery(junk, &p).kind, DnsDecision::kDrop);
  auto q = Query("allowed.test.", LDNS_RR_TYPE_A);
  q[2] |= 0x80;  // QR: a response
  EXPECT_EQ(DecideDnsQuery(q, &p).kind, DnsDecision::kDrop);
}

TEST(DnsMessage, CnameChainAddressesCountForQueriedName) {
  DnsPolicy p = AllowOnly("allowed.test");
  auto d = DecideDnsQuery(Query("allowed.test.", LDNS_RR_TYPE_A, 42), &p);
  ASSERT_EQ(d.kind, DnsDecision::kForward);
  ASSERT_TRUE(d.query);
  EXPECT_EQ(d.query->name, "allowed.test");
  auto up = BuildUpstreamQuery(*d.query, 999);
  ASSERT_FALSE(up.empty());

  ldns_pkt* r = Parse(up);
  ldns_pkt_set_qr(r, true);
  ldns_rr* rr = nullptr;
  ASSERT_EQ(ldns_rr_new_frm_str(&rr, "allowed.test. 300 IN CNAME cdn.other.", 0, nullptr, nullptr),
            LDNS_STATUS_OK);
  ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, rr);
  ASSERT_EQ(ldns_rr_new_frm_str(&rr, "cdn.other. 60 IN A 10.1.2.3", 0, nullptr, nullptr),
            LDNS_STATUS_OK);
  ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, rr);
  ASSERT_EQ(ldns_rr_new_frm_str(&rr, "unrelated.test. 60 IN A 10.9.9.9", 0, nullptr, nullptr),
            LDNS_STATUS_OK);
  ldns_pkt_push_rr(r, LDNS_SECTION_ANSWER, rr);
  auto reply_wire = Wire(r);

  EXPECT_FALSE(ProcessUpstreamReply(*d.query, 1000, reply_wire, true));  // wrong id: ignored
  auto a = ProcessUpstreamReply(*d.query, 999, reply_wire, true);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->addrs.size(), 1u);
  EXPECT_EQ(a->addrs[0].to_string(), "10.1.2.3");
  EXPECT_EQ(a->ttl, 60u);
  ldns_pkt* client = Parse(a->reply);
  EXPECT_EQ(ldns_pkt_id(client), 42);
  EXPECT_EQ(ldns_pkt_ancount(client), 2);  // the unrelated record is gone
  ldns_pkt_free(client);
}
