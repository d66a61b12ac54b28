#include "net/dns_message.h"

#include <ldns/ldns.h>

#include <algorithm>
#include <cstdlib>

#include "net/dns_pattern.h"

namespace hutch::net {

namespace {

constexpr size_t kMaxCnameHops = 16;

struct PktFree {
  void operator()(ldns_pkt* p) const { ldns_pkt_free(p); }
};
using PktPtr = std::unique_ptr<ldns_pkt, PktFree>;

PktPtr Parse(std::span<const uint8_t> msg) {
  if (msg.empty() || msg.size() > kDnsMaxMessage) return nullptr;
  ldns_pkt* p = nullptr;
  if (ldns_wire2pkt(&p, msg.data(), msg.size()) != LDNS_STATUS_OK) {
    if (p) ldns_pkt_free(p);
    return nullptr;
  }
  return PktPtr(p);
}

std::vector<uint8_t> ToWire(const ldns_pkt* p) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  if (ldns_pkt2wire(&buf, p, &size) != LDNS_STATUS_OK || !buf) {
    free(buf);
    return {};
  }
  std::vector<uint8_t> out(buf, buf + size);
  free(buf);
  return out;
}

// The queried name as a normalized host name, or nullopt when a label
// holds anything but [A-Za-z0-9-_] (a '.' inside a label included: joined
// with the separators it would read as another name).
std::optional<std::string> NameOf(const ldns_rdf* dname) {
  if (!dname || ldns_rdf_get_type(dname) != LDNS_RDF_TYPE_DNAME) return std::nullopt;
  const uint8_t* d = ldns_rdf_data(dname);
  size_t size = ldns_rdf_size(dname);
  std::string joined;
  size_t pos = 0;
  while (pos < size) {
    size_t len = d[pos];
    if (len == 0) break;
    if (len > 63 || pos + 1 + len > size) return std::nullopt;
    if (!joined.empty()) joined.push_back('.');
    for (size_t i = 0; i < len; i++) {
      char c = static_cast<char>(d[pos + 1 + i]);
      if (c == '.') return std::nullopt;
      joined.push_back(c);
    }
    pos += 1 + len;
  }
  if (joined.empty()) return std::string();  // the root
  return NormalizeDomainName(joined);
}

const ldns_rr* Question(const ldns_pkt* p) {
  if (ldns_pkt_qdcount(p) != 1) return nullptr;
  const ldns_rr_list* q = ldns_pkt_question(p);
  if (!q || ldns_rr_list_rr_count(q) != 1) return nullptr;
  return ldns_rr_list_rr(q, 0);
}

// A reply to the client's query `q`: its id, RD and question (with the
// client's letter case), RA set, and EDNS when the client used it.
PktPtr ReplySkeleton(const ldns_pkt* q, uint8_t rcode) {
  PktPtr r(ldns_pkt_new());
  if (!r) return nullptr;
  ldns_pkt_set_id(r.get(), ldns_pkt_id(q));
  ldns_pkt_set_qr(r.get(), true);
  ldns_pkt_set_opcode(r.get(), ldns_pkt_get_opcode(q));
  ldns_pkt_set_rd(r.get(), ldns_pkt_rd(q));
  ldns_pkt_set_ra(r.get(), true);
  ldns_pkt_set_rcode(r.get(), rcode);
  if (const ldns_rr* qr = Question(q)) {
    ldns_rr* copy = ldns_rr_clone(qr);
    if (copy && !ldns_pkt_push_rr(r.get(), LDNS_SECTION_QUESTION, copy)) ldns_rr_free(copy);
  }
  if (ldns_pkt_edns(q)) ldns_pkt_set_edns_udp_size(r.get(), kDnsMaxUdpAnswer);
  return r;
}

std::vector<uint8_t> Reply(const ldns_pkt* q, uint8_t rcode) {
  PktPtr r = ReplySkeleton(q, rcode);
  return r ? ToWire(r.get()) : std::vector<uint8_t>{};
}

DnsDecision Answer(std::shared_ptr<ldns_pkt> q, uint8_t rcode, const char* reason) {
  DnsDecision d;
  d.reply = Reply(q.get(), rcode);
  d.kind = d.reply.empty() ? DnsDecision::kDrop : DnsDecision::kReply;
  d.reason = reason;
  return d;
}

}  // namespace

DnsDecision DecideDnsQuery(std::span<const uint8_t> msg, const DnsPolicy* policy) {
  if (msg.size() > kDnsMaxQuery) return DnsDecision{};
  PktPtr parsed = Parse(msg);
  // A response is never answered: that would let anyone bounce traffic
  // between two DNS servers through us.
  if (!parsed || ldns_pkt_qr(parsed.get())) return DnsDecision{};
  std::shared_ptr<ldns_pkt> q(parsed.release(), PktFree{});
  if (!policy) return Answer(q, kRcodeRefused, "unknown_client");
  if (ldns_pkt_get_opcode(q.get()) != LDNS_PACKET_QUERY) return Answer(q, kRcodeNotImp, "notimp");
  const ldns_rr* question = Question(q.get());
  if (!question) return Answer(q, kRcodeFormErr, "formerr");
  if (ldns_rr_get_class(question) != LDNS_RR_CLASS_IN) return Answer(q, kRcodeRefused, "class");
  auto name = NameOf(ldns_rr_owner(question));
  if (!name || !DnsPolicyAllows(*policy, *name)) return Answer(q, kRcodeNxDomain, "denied");
  uint16_t qtype = static_cast<uint16_t>(ldns_rr_get_type(question));
  if (qtype == kTypeAaaa) return Answer(q, kRcodeNoError, "aaaa");

  DnsDecision d;
  d.kind = DnsDecision::kForward;
  d.reason = "forward";
  DnsQuery query;
  query.id = ldns_pkt_id(q.get());
  query.qtype = qtype;
  query.name = *name;
  if (ldns_pkt_edns(q.get())) {
    query.udp_limit = std::clamp<size_t>(ldns_pkt_edns_udp_size(q.get()), 512, kDnsMaxUdpAnswer);
  }
  query.pkt = std::move(q);
  d.query = std::move(query);
  return d;
}

std::vector<uint8_t> BuildUpstreamQuery(const DnsQuery& q, uint16_t id) {
  const ldns_rr* question = Question(q.pkt.get());
  if (!question) return {};
  ldns_rdf* owner = ldns_rdf_clone(ldns_rr_owner(question));
  if (!owner) return {};
  PktPtr u(ldns_pkt_query_new(owner, ldns_rr_get_type(question), LDNS_RR_CLASS_IN, LDNS_RD));
  if (!u) return {};
  ldns_pkt_set_id(u.get(), id);
  ldns_pkt_set_edns_udp_size(u.get(), kDnsMaxUdpAnswer);
  return ToWire(u.get());
}

std::vector<uint8_t> BuildDnsReply(const DnsQuery& q, uint8_t rcode) {
  return Reply(q.pkt.get(), rcode);
}

std::optional<DnsUpstreamAnswer> ProcessUpstreamReply(const DnsQuery& q, uint16_t id,
                                                      std::span<const uint8_t> msg, bool for_udp) {
  PktPtr up = Parse(msg);
  if (!up || !ldns_pkt_qr(up.get()) || ldns_pkt_id(up.get()) != id) return std::nullopt;
  const ldns_rr* mine = Question(q.pkt.get());
  const ldns_rr* theirs = Question(up.get());
  if (!mine || !theirs || ldns_rr_get_type(mine) != ldns_rr_get_type(theirs) ||
      ldns_rr_get_class(theirs) != LDNS_RR_CLASS_IN ||
      ldns_dname_compare(ldns_rr_owner(mine), ldns_rr_owner(theirs)) != 0) {
    return std::nullopt;
  }
  DnsUpstreamAnswer out;
  if (ldns_pkt_tc(up.get())) {
    out.upstream_truncated = true;
    return out;
  }
  uint8_t rcode = static_cast<uint8_t>(ldns_pkt_get_rcode(up.get()));
  // Upstream's own failures (REFUSED, NOTIMP...) all read as SERVFAIL to
  // the sandbox: they say nothing about the name.
  if (rcode != kRcodeNoError && rcode != kRcodeNxDomain) rcode = kRcodeServFail;
  PktPtr r = ReplySkeleton(q.pkt.get(), rcode);
  if (!r) return std::nullopt;

  // The CNAME chain from the queried name, within the answer section,
  // at most kMaxCnameHops long (resolvers give up around there too), so
  // the work stays linear in the answer's size.
  const ldns_rr_list* answer = ldns_pkt_answer(up.get());
  size_t count = answer ? ldns_rr_list_rr_count(answer) : 0;
  std::vector<const ldns_rdf*> chain{ldns_rr_owner(mine)};
  auto on_chain = [&](const ldns_rdf* owner) {
    return std::any_of(chain.begin(), chain.end(),
                       [&](const ldns_rdf* c) { return ldns_dname_compare(c, owner) == 0; });
  };
  for (bool grew = true; grew && chain.size() <= kMaxCnameHops;) {
    grew = false;
    for (size_t i = 0; i < count && chain.size() <= kMaxCnameHops; i++) {
      const ldns_rr* rr = ldns_rr_list_rr(answer, i);
      if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME || ldns_rr_rd_count(rr) != 1) continue;
      const ldns_rdf* target = ldns_rr_rdf(rr, 0);
      if (on_chain(ldns_rr_owner(rr)) && !on_chain(target)) {
        chain.push_back(target);
        grew = true;
      }
    }
  }
  bool any_ttl = false;
  for (size_t i = 0; i < count; i++) {
    const ldns_rr* rr = ldns_rr_list_rr(answer, i);
    if (!on_chain(ldns_rr_owner(rr)) || ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN) continue;
    ldns_rr* copy = ldns_rr_clone(rr);
    if (!copy) return std::nullopt;
    if (!ldns_pkt_push_rr(r.get(), LDNS_SECTION_ANSWER, copy)) {
      ldns_rr_free(copy);
      return std::nullopt;
    }
    out.ttl = any_ttl ? std::min(out.ttl, ldns_rr_ttl(rr)) : ldns_rr_ttl(rr);
    any_ttl = true;
    if (ldns_rr_get_type(rr) == LDNS_RR_TYPE_A && ldns_rr_rd_count(rr) == 1) {
      const ldns_rdf* a = ldns_rr_rdf(rr, 0);
      if (ldns_rdf_get_type(a) == LDNS_RDF_TYPE_A && ldns_rdf_size(a) == 4) {
        boost::asio::ip::address_v4::bytes_type b;
        std::copy_n(ldns_rdf_data(a), 4, b.begin());
        out.addrs.emplace_back(b);
      }
    }
  }
  out.reply = ToWire(r.get());
  if (out.reply.empty()) return std::nullopt;
  if (for_udp && out.reply.size() > q.udp_limit) {
    // The client asks again over TCP; it gets the records (and the
    // addresses are recorded) then.
    PktPtr t = ReplySkeleton(q.pkt.get(), rcode);
    if (!t) return std::nullopt;
    ldns_pkt_set_tc(t.get(), true);
    out.reply = ToWire(t.get());
    out.client_truncated = true;
    out.addrs.clear();
  }
  if (out.addrs.empty()) out.ttl = 0;
  return out;
}

}  // namespace hutch::net
