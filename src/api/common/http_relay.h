// One HTTP/1.1 exchange relayed between a client's connection and an
// upstream connection the caller opened: the request header rewritten
// (hop-by-hop fields out, target replaced, X-Forwarded-* in), then the
// body pumped up while the response comes down, streamed; after a 101 the
// connection is a byte pipe both ways until either side closes.
//
// Bodies stream through a fixed 64 KiB buffer per direction: nothing is
// buffered whole, so uploads, downloads, SSE and WebSockets of any size
// and duration pass with flat memory. Two users: the port proxy (a port
// inside a sandbox) and the cluster's node relay (a request for a sandbox
// another node owns). Lives on the I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "http/http_context.h"

namespace hutch::api {

struct RelaySpec {
  // Path and query the upstream sees, starting with '/'.
  std::string target;
  // Request headers that are not forwarded (credentials hutch consumed).
  std::vector<std::string> strip_headers;
  // Sent as X-Forwarded-Prefix when not empty.
  std::string forwarded_prefix;
  // Request headers set (replaced) on the way up.
  std::vector<std::pair<std::string, std::string>> set_headers;
  // Nothing moved in either direction for this long: both sides closed.
  std::chrono::seconds idle_timeout{300};
  // Polled every second: true ends the exchange (its far end went away).
  std::function<bool()> gone;
  // Told, every second, when traffic last moved.
  std::function<void(std::chrono::steady_clock::time_point)> active;
  // What the client is told when the upstream closed without an answer:
  // "<upstream_name> closed the connection without an answer (...)".
  std::string upstream_name = "the upstream server";
  Code unreachable_code = Code::kPortUnreachable;
};

// Relays the request of `ctx` over `up` and answers it (after a 101,
// relays the connection until it closes).
asio::awaitable<void> RelayHttp(HttpContext& ctx, beast::tcp_stream up, const RelaySpec& spec);

}  // namespace hutch::api
