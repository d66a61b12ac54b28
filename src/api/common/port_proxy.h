// The port proxy: an HTTP/1.1 request (any method) or a protocol upgrade
// (WebSocket) relayed to a TCP port that a process listens on inside a
// sandbox. The upstream socket is created in the sandbox's network
// namespace (Instance::NetNamespace + TcpSocketInNetns) and connects to
// Instance::PortAddress():<port> there — a jail's 127.0.0.1, so a server
// bound to loopback inside the sandbox is reachable; a vm guest's address
// on its tap link — and nothing of the host's network is involved.
//
// Bodies stream both ways through a fixed 64 KiB buffer per direction:
// nothing is buffered whole, so uploads, downloads and SSE of any size
// and duration pass with flat memory. After a 101 the connection becomes a
// byte pipe in both directions until either side closes.
//
// Each relay has a watchdog: it cuts the exchange when nothing moved for
// the idle timeout, or when the sandbox stops (delete, TTL, failure).
// Closing either side closes the other. Lives on the I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sandbox_manager.h"
#include "http/http_context.h"

namespace hutch::api {

// What to relay where.
struct ProxyRequest {
  std::string sandbox_id;
  int port = 0;
  // Path and query the sandbox's server sees, starting with '/'.
  std::string target;
  // Request headers that are not forwarded: the credentials hutch itself
  // consumed (the sandbox's server must never see a hutch key).
  std::vector<std::string> strip_headers;
  // Sent as X-Forwarded-Prefix when not empty (the path the proxy route
  // adds in front of what the server sees), so apps can build links.
  std::string forwarded_prefix;
};

struct PortProxyOptions {
  // Relayed exchanges open at once per sandbox (WebSockets, slow
  // downloads); one more is refused with 503 capacity_exhausted.
  int max_connections_per_sandbox = 256;
  // Nothing moved in either direction for this long: both sides closed.
  std::chrono::seconds idle_timeout{300};
  std::chrono::milliseconds connect_timeout{5000};
};

class PortProxy {
 public:
  explicit PortProxy(SandboxManager* mgr, PortProxyOptions opts = {}) : mgr_(mgr), opts_(opts) {}

  // Relays the request of `ctx` and answers it (after a 101, relays the
  // connection until it closes). Refusals are JSON errors through
  // ctx.SendError: sandbox_not_found, conflict (paused), sandbox_not_running,
  // capacity_exhausted, port_unreachable (502: nothing accepts connections
  // on the port, or it closed without answering).
  asio::awaitable<void> Serve(HttpContext& ctx, ProxyRequest req);

  // "1".."65535" (decimal, no sign, no leading zeros); invalid_request else.
  static Result<int> ParsePort(std::string_view s);

  // A Host header naming a sandbox's port the way E2B's getHost() builds
  // it: "{port}-{id}.{domain}[:{listen port}]". Only ids of hutch's own
  // form ("sb_" + lowercase hex, case-folded as hostnames are) match, so
  // a host name that merely contains a dash never leaves the API.
  struct PortHost {
    std::string port;  // unchecked digits: ParsePort decides
    std::string id;
  };
  static std::optional<PortHost> ParsePortHost(std::string_view host);

  // Relays in progress (all sandboxes).
  size_t open_relays() const { return total_; }

 private:
  SandboxManager* mgr_;
  PortProxyOptions opts_;
  std::map<std::string, int> open_;  // relays in progress per sandbox
  size_t total_ = 0;
};

}  // namespace hutch::api
