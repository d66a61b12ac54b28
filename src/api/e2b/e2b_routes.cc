// The E2B dialect's place in the router: the control plane's routes under
// /e2b behind X-API-Key, and the requests their path does not decide —
// envd calls (E2b-Sandbox-Id, or a Host of 49983-{id}.<domain>, checked by
// HandleEnvd with the sandbox's access token) and exposed ports (a Host
// naming another sandbox port, or E2b-Sandbox-Port: e2b_ports.cc).
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_auth.h"

namespace hutch::api::e2b {

namespace {

// The sandbox port a Host names ({port}-{id}.<domain>), if any.
std::optional<PortProxy::PortHost> HostPort(const HttpContext& ctx) {
  return PortProxy::ParsePortHost(ctx.Header("Host"));
}

bool IsEnvdHost(const HttpContext& ctx) {
  const auto ph = HostPort(ctx);
  return ph && ph->port == kEnvdPort;
}

Error NoRoute(const HttpContext& ctx) {
  return MakeError(Code::kNotFound, "no E2B route for " + ctx.path());
}

}  // namespace

asio::awaitable<bool> E2bApi::Admit(HttpContext& ctx) {
  auth::Principal who = creds_->MatchAnyKey(KeyCandidates(ctx.Header("X-API-Key")));
  if (who.empty()) {
    Error e =
        MakeError(Code::kUnauthorized,
                  "missing or invalid API key (X-API-Key: a hutch key, or e2b_<hex> for hk_<hex>)");
    co_await SendControlError(ctx, e);
    co_return false;
  }
  ctx.MarkAuthenticated();
  if (int wait = creds_->Charge(who.owner); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited, "rate limit of this API key exceeded; retry after " +
                                                std::to_string(wait) + " s");
    co_await SendControlError(ctx, e);
    co_return false;
  }
  ctx.set_principal(std::move(who));
  co_return true;
}

asio::awaitable<bool> E2bApi::Scope(HttpContext& ctx) {
  // /e2b/sandboxes/{id}/... and /e2b/v2/sandboxes/{id}/...: another
  // tenant's sandbox is not found (tenant_scope.h).
  const auto& seg = ctx.segments();
  const size_t at = seg.size() > 1 && seg[1] == "v2" ? 2 : 1;
  if (mgr_ != nullptr && seg.size() > at + 1 && seg[at] == "sandboxes") {
    const ScopedTarget t{ScopedKind::kSandbox, seg[at + 1]};
    if (auto st = CheckScope(*mgr_, ctx.principal(), t); !st.ok()) {
      co_await SendControlError(ctx, st.error());
      co_return false;
    }
  }
  co_return true;
}

void E2bApi::Register(Router& r) {
  using V = http::verb;
  // A Host naming a sandbox's port (E2B getHost) owns every path: the
  // request is the sandbox server's, whatever it looks like. Port 49983 is
  // envd itself, which hutch answers (below).
  r.AddMatcher({"Host: {port}-{id}.<domain> (exposed port)",
                [](const HttpContext& ctx, const std::vector<std::string>&) {
                  const auto ph = HostPort(ctx);
                  return ph && ph->port != kEnvdPort;
                },
                [this](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
                  const auto ph = *HostPort(ctx);
                  co_await PortsByHost(ctx, ph.id, ph.port);
                },
                /*raw=*/true});
  r.AddMatcher({"/e2b/... with E2b-Sandbox-Id and E2b-Sandbox-Port (exposed port)",
                &E2bApi::IsPortRequest,
                [this](HttpContext& ctx, const RouteMatch&) { return PortsByE2bHeader(ctx); },
                /*raw=*/true});
  // envd calls name their sandbox in the Host (what SDKs without a
  // single-URL mode use, go-e2b: the calls from the root of the path) or in
  // a header under /e2b, and authenticate with its access token (checked by
  // HandleEnvd); the control plane uses X-API-Key.
  r.AddMatcher(
      {"Host: 49983-{id}.<domain> (envd)",
       [](const HttpContext& ctx, const std::vector<std::string>&) { return IsEnvdHost(ctx); },
       [this](HttpContext& ctx, const RouteMatch& m) -> asio::awaitable<void> {
         const std::string id = HostPort(ctx)->id;
         co_await HandleEnvd(ctx, id, m.seg);
       }});
  r.AddMatcher({"/e2b/... with E2b-Sandbox-Id (envd)",
                [](const HttpContext& ctx, const std::vector<std::string>& seg) {
                  return !seg.empty() && seg[0] == "e2b" && !ctx.Header("E2b-Sandbox-Id").empty();
                },
                [this](HttpContext& ctx, const RouteMatch& m) -> asio::awaitable<void> {
                  const std::string id = ctx.Header("E2b-Sandbox-Id");
                  const std::vector<std::string> seg(m.seg.begin() + 1, m.seg.end());
                  co_await HandleEnvd(ctx, id, seg);
                }});
  r.AddLogLabel([](const HttpContext& ctx,
                   const std::vector<std::string>& seg) -> std::optional<std::string> {
    if (auto ph = PortProxy::ParsePortHost(ctx.Header("Host"))) return ph->id;
    if (!seg.empty() && seg[0] == "e2b" && !ctx.Header("E2b-Sandbox-Id").empty())
      return ctx.Header("E2b-Sandbox-Id");
    if (seg.size() >= 3 && seg[0] == "e2b" && seg[1] == "sandboxes") return seg[2];
    return std::nullopt;
  });

  Mount mount;
  mount.prefix = "/e2b";
  mount.guard = [this](HttpContext& ctx) { return Admit(ctx); };
  mount.scope = [this](HttpContext& ctx) { return Scope(ctx); };
  // (Handlers that make an Error are coroutines themselves, so it lives
  // as long as the answer that refers to it.)
  mount.not_found = [](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
    const Error e = NoRoute(ctx);
    co_await SendControlError(ctx, e);
  };
  mount.method_not_allowed = mount.not_found;
  r.AddMount(std::move(mount));

  auto wrong_method = [](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
    const Error e = MakeError(Code::kMethodNotAllowed, "method not allowed here");
    co_await SendControlError(ctx, e);
  };
  for (const bool v2 : {false, true}) {
    const std::string base = v2 ? "/e2b/v2/sandboxes" : "/e2b/sandboxes";
    r.Add(V::post, base,
          [this](HttpContext& c, const RouteMatch&) { return Create(c, c.principal().owner); });
    r.Add(V::get, base, [this, v2](HttpContext& c, const RouteMatch&) { return List(c, v2); });
    r.Add(kAnyMethod, base, wrong_method);
    r.Add(V::post, base + "/{id}/connect",
          [this](HttpContext& c, const RouteMatch& m) { return Connect(c, m["id"], false); });
    r.Add(V::get, base + "/{id}/logs",
          [this, v2](HttpContext& c, const RouteMatch& m) { return Logs(c, m["id"], v2); });
  }
  r.Add(V::get, "/e2b/sandboxes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return Get(c, m["id"]); });
  r.Add(V::delete_, "/e2b/sandboxes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return Kill(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/timeout",
        [this](HttpContext& c, const RouteMatch& m) { return SetTimeout(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/pause",
        [this](HttpContext& c, const RouteMatch& m) { return Pause(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/resume",
        [this](HttpContext& c, const RouteMatch& m) { return Connect(c, m["id"], true); });
  r.Add(V::get, "/e2b/sandboxes/{id}/metrics",
        [this](HttpContext& c, const RouteMatch& m) { return Metrics(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/refreshes",
        [this](HttpContext& c, const RouteMatch& m) { return Refresh(c, m["id"]); });
  r.Add(V::put, "/e2b/sandboxes/{id}/network",
        [this](HttpContext& c, const RouteMatch& m) { return UpdateNetwork(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/fork",
        [this](HttpContext& c, const RouteMatch& m) { return Fork(c, m["id"]); });
  r.Add(V::post, "/e2b/sandboxes/{id}/snapshots",
        [this](HttpContext& c, const RouteMatch& m) { return CreateSnapshot(c, m["id"]); });
  r.Add(V::get, "/e2b/snapshots",
        [this](HttpContext& c, const RouteMatch&) { return ListSnapshots(c); });
  r.Add(V::post, "/e2b/volumes",
        [this](HttpContext& c, const RouteMatch&) { return CreateVolume(c); });
  r.Add(V::get, "/e2b/volumes",
        [this](HttpContext& c, const RouteMatch&) { return ListVolumes(c); });
  r.Add(V::get, "/e2b/volumes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return GetVolume(c, m["id"]); });
  r.Add(V::delete_, "/e2b/volumes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return DeleteVolume(c, m["id"]); });
  // Before DELETE /e2b/templates/{id}: DELETE /e2b/templates/tags is its own.
  templates_.Register(r);
  r.Add(V::delete_, "/e2b/templates/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return DeleteTemplate(c, m["id"]); });
}

}  // namespace hutch::api::e2b
