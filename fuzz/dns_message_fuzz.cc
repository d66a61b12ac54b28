// The DNS proxy's message path (src/net/dns_message.h): a sandbox's query
// through the decision, and the same bytes as upstream's answer to a fixed
// allowed query. Invariants: no crash, replies parse as DNS size-bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "net/dns_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hutch::net;
  std::span<const uint8_t> in(data, size);
  DnsPolicy policy;
  policy.allow = {"*.test", "allowed.test"};
  policy.deny = {"denied.test"};
  DnsDecision d = DecideDnsQuery(in, &policy);
  if (d.reply.size() > kDnsMaxMessage) abort();
  DecideDnsQuery(in, nullptr);
  if (d.kind == DnsDecision::kForward && d.query) {
    auto up = BuildUpstreamQuery(*d.query, 1);
    auto a = ProcessUpstreamReply(*d.query, 1, in, true);
    if (a && !a->client_truncated && a->reply.size() > d.query->udp_limit) abort();
    (void)up;
  }
  return 0;
}
