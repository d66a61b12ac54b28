// Exposed ports under /v1: /v1/sandboxes/{id}/ports/{port}/... with the
// /v1 bearer key, checked by the router like every /v1 route.
// Authorization is not forwarded: the sandbox's server never sees a
// credential of hutch. (The E2B forms of the same relay are the E2B
// dialect's: src/api/e2b/e2b_ports.cc.)
#include <algorithm>

#include "api/v1/v1_api.h"
#include "http/request_target.h"

namespace hutch::api {

asio::awaitable<void> V1Api::Ports(HttpContext& ctx, const std::string& id,
                                   const std::vector<std::string>& seg) {
  if (seg.size() < 5) {
    Error e =
        MakeError(Code::kInvalidRequest, "a port is required: /v1/sandboxes/{id}/ports/{port}/...");
    co_return co_await ctx.SendError(e);
  }
  auto port = PortProxy::ParsePort(seg[4]);
  if (!port.ok()) co_return co_await ctx.SendError(port.error());
  // The router matched decoded segments; the server gets the raw rest.
  SplitTarget split = SplitRequestTarget(ctx.target(), 5);
  if (!split.ok || !std::equal(split.prefix.begin(), split.prefix.end(), seg.begin())) {
    Error e = MakeError(Code::kInvalidRequest,
                        "malformed path (an escaped '/' in the sandbox id or port?)");
    co_return co_await ctx.SendError(e);
  }
  ProxyRequest req;
  req.sandbox_id = id;
  req.port = *port;
  req.target = std::move(split.rest);
  req.strip_headers = {"Authorization"};
  req.forwarded_prefix = "/v1/sandboxes/" + id + "/ports/" + seg[4];
  co_await ports_.Serve(ctx, std::move(req));
}

}  // namespace hutch::api
