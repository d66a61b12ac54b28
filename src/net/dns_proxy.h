// DnsProxy: the DNS resolver hutchd runs for its sandboxes. It listens on
// UDP and TCP at addresses added at runtime (each sandbox's host-side veth
// address), asks `policy` for the querying client's DnsPolicy, answers
// denied names itself (NXDOMAIN) and forwards allowed ones to one upstream
// resolver. Before the answer to an allowed name goes back, `on_resolved`
// is awaited with the A records it carries, so the caller can put them in
// the sandbox's nftables set first: the sandbox may connect to an address
// only once an allowed name resolved to it.
//
// The decisions themselves are in dns_message.h (pure, fuzzed); this file
// is the I/O: listeners, the upstream exchange (UDP, then TCP when upstream
// truncates), timeouts and caps.
//
// Bounds: queries over kDnsMaxQuery bytes are dropped; an upstream that
// does not answer within `upstream_timeout` gives SERVFAIL; a client with
// `max_inflight_per_client` queries in flight (or the proxy with
// `max_inflight_total`) has further UDP queries dropped (the client
// retries; an answer would only feed a flood); a client gets at most
// `max_tcp_per_client` TCP connections, each closed after `tcp_idle` idle;
// a client sending more than `queries_per_second` (burst twice that) has
// the excess dropped.
//
// Threads: everything runs on the io_context's one thread, callbacks
// included; call AddListener/RemoveListener/Stop from that thread (or
// before it runs). The object may be destroyed while queries are in
// flight: they finish without calling back.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/dns_policy.h"

namespace hutch::net {

namespace asio = boost::asio;

struct DnsProxyOptions {
  asio::ip::udp::endpoint upstream;  // the resolver allowed queries go to
  std::chrono::milliseconds upstream_timeout{2000};
  size_t max_inflight_per_client = 64;
  size_t max_inflight_total = 1024;
  size_t max_tcp_per_client = 8;
  std::chrono::milliseconds tcp_idle{10000};
  // Queries a second per client, burst twice that; past it queries are
  // dropped (<= 0: no limit).
  double queries_per_second = 200;
};

// The policy of the sandbox at `client`, nullopt when no sandbox has that
// address (the query is REFUSED).
using DnsPolicyLookup = std::function<std::optional<DnsPolicy>(const asio::ip::address& client)>;

// Called (and awaited) before an allowed answer carrying A records goes to
// `client`: `name` is the queried name (normalized), `addrs` the A records
// on its CNAME chain, `ttl_seconds` the smallest TTL on that chain (may be
// 0: apply a floor if the set needs one).
using DnsResolvedCallback = std::function<asio::awaitable<void>(
    const asio::ip::address& client, const std::string& name,
    std::vector<asio::ip::address_v4> addrs, uint32_t ttl_seconds)>;

// Counters, for metrics and tests.
struct DnsProxyStats {
  uint64_t queries = 0;        // messages received (UDP datagrams + TCP frames)
  uint64_t dropped = 0;        // malformed, oversized, or over a cap
  uint64_t rate_limited = 0;   // of those: over the client's query rate
  uint64_t refused = 0;        // unknown client
  uint64_t denied = 0;         // NXDOMAIN by policy
  uint64_t answered_here = 0;  // AAAA, NOTIMP, FORMERR, other classes
  uint64_t forwarded = 0;
  uint64_t upstream_failures = 0;  // timeouts and errors: SERVFAIL
};

class DnsProxy {
 public:
  DnsProxy(asio::io_context& io, DnsProxyOptions options, DnsPolicyLookup policy,
           DnsResolvedCallback on_resolved);
  ~DnsProxy();
  DnsProxy(const DnsProxy&) = delete;
  DnsProxy& operator=(const DnsProxy&) = delete;

  // Listens on UDP and TCP at address:port (port 0: a free port, the same
  // for both) and returns the port. kConflict if `address` already has a
  // listener, kUnavailable if binding fails.
  Result<uint16_t> AddListener(const asio::ip::address& address, uint16_t port);
  // Closes the listener at `address` (its in-flight queries still finish).
  void RemoveListener(const asio::ip::address& address);
  // Upstream for queries forwarded from now on.
  void SetUpstream(const asio::ip::udp::endpoint& upstream);
  // Closes every listener; no callback is called after this returns.
  void Stop();

  DnsProxyStats stats() const;

  struct Core;  // shared with in-flight coroutines (dns_proxy.cc)

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace hutch::net
