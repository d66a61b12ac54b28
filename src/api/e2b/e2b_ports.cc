// Exposed ports, the E2B ways: a request names a port inside a sandbox
// and authenticates, before PortProxy relays it.
//
//  - E2B getHost(): a Host header "{port}-{id}.{domain}", any path.
//  - E2B through one gateway URL: a request under /e2b with E2b-Sandbox-Id
//    and an E2b-Sandbox-Port other than envd's (49983).
//
// Both accept the sandbox's traffic access token (e2b-traffic-access-token),
// its envd access token (X-Access-Token), or any hutch key (X-API-Key, also
// in the e2b_ form, or Authorization: Bearer). Whichever was used is not
// forwarded: the sandbox's server never sees a credential of hutch. (The
// /v1 form of the same relay is src/api/v1/v1_ports.cc.)
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_auth.h"
#include "auth/sandbox_token.h"
#include "http/request_target.h"

namespace hutch::api::e2b {

bool E2bApi::IsPortRequest(const HttpContext& ctx, const std::vector<std::string>& seg) {
  if (seg.empty() || seg[0] != "e2b" || ctx.Header("E2b-Sandbox-Id").empty()) return false;
  const std::string port = ctx.Header("E2b-Sandbox-Port");
  return !port.empty() && port != kEnvdPort;
}

asio::awaitable<void> E2bApi::PortsByHost(HttpContext& ctx, const std::string& id,
                                          const std::string& port_text) {
  // (Named locals: GCC 12 mishandles temporaries inside co_await.)
  std::string target(ctx.target());
  std::string no_prefix;
  co_await PortsE2b(ctx, id, port_text, std::move(target), std::move(no_prefix));
}

asio::awaitable<void> E2bApi::PortsByE2bHeader(HttpContext& ctx) {
  // E2B_SANDBOX_URL ends in /e2b, so the server's own path follows it.
  SplitTarget split = SplitRequestTarget(ctx.target(), 1);
  if (!split.ok) {
    Error e = MakeError(Code::kInvalidRequest, "malformed path");
    co_return co_await ctx.SendError(e);
  }
  const std::string id = ctx.Header("E2b-Sandbox-Id");
  const std::string port = ctx.Header("E2b-Sandbox-Port");
  std::string prefix = "/e2b";
  co_await PortsE2b(ctx, id, port, std::move(split.rest), std::move(prefix));
}

asio::awaitable<void> E2bApi::PortsE2b(HttpContext& ctx, const std::string& id,
                                       const std::string& port_text, std::string target,
                                       std::string prefix) {
  auto port = PortProxy::ParsePort(port_text);
  if (!port.ok()) co_return co_await ctx.SendError(port.error());
  ProxyRequest req;
  req.strip_headers = {"E2b-Sandbox-Id", "E2b-Sandbox-Port"};
  // Authentication first, the sandbox's existence after: without a
  // credential every id answers 401 alike.
  std::string spender;  // whose rate-limit tokens this request spends
  const std::string api_key = ctx.Header("X-API-Key");
  auth::Principal who = creds_->MatchAnyKey(KeyCandidates(api_key));
  if (!who.empty()) {
    req.strip_headers.push_back("X-API-Key");
  } else if (who = creds_->MatchBearer(ctx.Header("Authorization")); !who.empty()) {
    req.strip_headers.push_back("Authorization");
  }
  spender = who.owner;
  auto rec = mgr_->Get(id);
  // Another tenant's sandbox reads as no sandbox at all (issue 32 #13).
  if (!who.empty() && rec.ok() && !who.Owns(rec->owner_key))
    rec = MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
  if (spender.empty() && rec.ok()) {
    const std::string traffic = ctx.Header("e2b-traffic-access-token");
    const std::string access = ctx.Header("X-Access-Token");
    if (creds_->SandboxTokenMatches(auth::SandboxTokenKind::kE2bTraffic, traffic, rec->owner_key,
                                    rec->id)) {
      req.strip_headers.push_back("e2b-traffic-access-token");
      spender = rec->owner_key;
    } else if (creds_->SandboxTokenMatches(auth::SandboxTokenKind::kE2bEnvd, access, rec->owner_key,
                                           rec->id)) {
      req.strip_headers.push_back("X-Access-Token");
      spender = rec->owner_key;
    }
  }
  if (spender.empty()) {
    Error e =
        MakeError(Code::kUnauthorized, "missing or wrong credential for sandbox " + id +
                                           "'s ports (e2b-traffic-access-token, X-Access-Token, "
                                           "X-API-Key or Authorization: Bearer)");
    co_return co_await ctx.SendError(e);
  }
  ctx.MarkAuthenticated();
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  if (int wait = creds_->Charge(spender); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited, "rate limit of this API key exceeded; retry after " +
                                                std::to_string(wait) + " s");
    co_return co_await ctx.SendError(e);
  }
  req.sandbox_id = id;
  req.port = *port;
  req.target = std::move(target);
  req.forwarded_prefix = std::move(prefix);
  co_await ports_->Serve(ctx, std::move(req));
}

}  // namespace hutch::api::e2b
