// What the DNS proxy does with one message, as pure functions: parse a
// sandbox's query, decide (answer it here, forward it, or drop it), build
// the query sent upstream, and turn upstream's reply into the sandbox's
// answer plus the IPv4 addresses it makes reachable.
//
// No sockets and no coroutines here (the fuzz target links this file with
// clang 14 + Boost 1.74, which lack co_await): DnsProxy (dns_proxy.h) does
// the I/O around these functions.
//
// Messages are parsed and built with ldns (libldns, BSD), not by hand: a
// DNS parser is exactly the kind of code that should come from a library
// that has met hostile input for years. fuzz/dns_message_fuzz.cc still
// drives this whole path.
//
// Decisions (docs/security.md "Domain rules"):
// - not a parseable DNS query (or a response, or oversized): dropped, no
//   answer (answering garbage would make us a reflector);
// - client without a policy: REFUSED;
// - opcode other than QUERY: NOTIMP; not exactly one question: FORMERR;
//   class other than IN: REFUSED;
// - name not allowed by the policy, or not a plain host name: NXDOMAIN
//   (not REFUSED: REFUSED makes stub resolvers try the next server or the
//   search list, NXDOMAIN is a final "does not exist");
// - AAAA of an allowed name: NOERROR with no records (sandboxes have no
//   IPv6; answering here avoids a useless upstream round trip);
// - anything else for an allowed name: forwarded.
// The answer to a forwarded query keeps only the answer-section records
// on the CNAME chain from the queried name: authority and additional
// sections (glue for other names) never reach the sandbox.
#pragma once

#include <boost/asio/ip/address_v4.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/dns_policy.h"

struct ldns_struct_pkt;

namespace hutch::net {

// DNS over TCP frames a message with a 16-bit length: nothing is larger.
inline constexpr size_t kDnsMaxMessage = 65535;
// The largest UDP answer we send (the DNS flag day 2020 size: no IP
// fragmentation); clients without EDNS get 512.
inline constexpr size_t kDnsMaxUdpAnswer = 1232;
// The largest query we accept from a sandbox: a real one is < 300 bytes.
inline constexpr size_t kDnsMaxQuery = 4096;

inline constexpr uint8_t kRcodeNoError = 0;
inline constexpr uint8_t kRcodeFormErr = 1;
inline constexpr uint8_t kRcodeServFail = 2;
inline constexpr uint8_t kRcodeNxDomain = 3;
inline constexpr uint8_t kRcodeNotImp = 4;
inline constexpr uint8_t kRcodeRefused = 5;

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeCname = 5;
inline constexpr uint16_t kTypeAaaa = 28;

// A client's query that passed the policy, kept to build the upstream
// query and to check and rewrite upstream's answer. Cheap to copy.
struct DnsQuery {
  std::shared_ptr<ldns_struct_pkt> pkt;  // the client's parsed query
  uint16_t id = 0;                       // the client's id
  uint16_t qtype = 0;
  std::string name;  // normalized (NormalizeDomainName)
  // The largest UDP answer this client accepts (512, or its EDNS size
  // capped at kDnsMaxUdpAnswer).
  size_t udp_limit = 512;
};

struct DnsDecision {
  enum Kind { kDrop, kReply, kForward };
  Kind kind = kDrop;
  std::vector<uint8_t> reply;     // kReply: the answer to send
  std::optional<DnsQuery> query;  // kReply (when parsed) and kForward
  // For logs and counters: "malformed", "unknown_client", "denied",
  // "aaaa", "notimp", "formerr", "class", "forward".
  const char* reason = "malformed";
};

// policy == nullptr: the client is unknown (no sandbox has this address).
DnsDecision DecideDnsQuery(std::span<const uint8_t> msg, const DnsPolicy* policy);

// The query sent upstream for `q`: same question, recursion desired, EDNS
// with our UDP size, id `id` (random per query: upstream answers are
// matched by id and question), nothing else of the client's message.
std::vector<uint8_t> BuildUpstreamQuery(const DnsQuery& q, uint16_t id);

// An answer built here for `q` with `rcode` and no records (SERVFAIL when
// upstream timed out, and the replies of DecideDnsQuery).
std::vector<uint8_t> BuildDnsReply(const DnsQuery& q, uint8_t rcode);

struct DnsUpstreamAnswer {
  bool upstream_truncated = false;  // upstream set TC: ask again over TCP
  std::vector<uint8_t> reply;       // the answer for the client
  bool client_truncated = false;    // too big for the client's UDP: TC set, no records
  // A records on the chain from the queried name, and the smallest TTL
  // on that chain (CNAMEs included); empty when the reply has none or is
  // truncated for the client.
  std::vector<boost::asio::ip::address_v4> addrs;
  uint32_t ttl = 0;
};

// Checks that `msg` answers `q` (sent with id `id`). nullopt: malformed or
// not an answer to this query (wrong id or question): ignore it and keep
// waiting. for_udp: the client asked over UDP (apply its size limit).
std::optional<DnsUpstreamAnswer> ProcessUpstreamReply(const DnsQuery& q, uint16_t id,
                                                      std::span<const uint8_t> msg, bool for_udp);

}  // namespace hutch::net
