// The OpenSandbox dialect's place in the router: the lifecycle API under
// /opensandbox/v1 behind OPEN-SANDBOX-API-KEY, and the server proxy under
// /opensandbox/sandboxes/{id}/proxy/{port}/ (osb_proxy.cc: its credential
// is the sandbox's access token or a key).
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

asio::awaitable<bool> OpenSandboxApi::Admit(HttpContext& ctx) {
  const std::string presented = ctx.Header("OPEN-SANDBOX-API-KEY");
  auth::Principal who = creds_->MatchKey(presented);
  if (who.empty()) {
    // OpenSandbox's own codes for these two, which its SDKs show as is.
    ctx.NoteError(MakeError(Code::kUnauthorized, "api key"));
    const nlohmann::json body = {
        {"code", presented.empty() ? "MISSING_API_KEY" : "INVALID_API_KEY"},
        {"message", presented.empty() ? "OPEN-SANDBOX-API-KEY header is required (a hutch API key)"
                                      : "OPEN-SANDBOX-API-KEY is not a valid hutch API key"}};
    co_await ctx.SendJson(401, body);
    co_return false;
  }
  ctx.MarkAuthenticated();
  if (int wait = creds_->Charge(who.owner); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited, "rate limit of this API key exceeded; retry after " +
                                                std::to_string(wait) + " s");
    co_await SendError(ctx, e);
    co_return false;
  }
  ctx.set_principal(std::move(who));
  co_return true;
}

asio::awaitable<bool> OpenSandboxApi::Scope(HttpContext& ctx) {
  // /opensandbox/v1/sandboxes/{id}/... and .../snapshots/{id}: another
  // tenant's reads as not found (tenant_scope.h).
  const auto& seg = ctx.segments();
  if (mgr_ != nullptr && seg.size() > 3 && seg[1] == "v1") {
    ScopedTarget t;
    if (seg[2] == "sandboxes") t = {ScopedKind::kSandbox, seg[3]};
    if (seg[2] == "snapshots") t = {ScopedKind::kSnapshot, seg[3]};
    if (auto st = CheckScope(*mgr_, ctx.principal(), t); !st.ok()) {
      co_await SendError(ctx, st.error());
      co_return false;
    }
  }
  co_return true;
}

void OpenSandboxApi::Register(Router& r) {
  using V = http::verb;
  const std::string root = std::string("/") + kPrefix;
  const std::string v1 = root + "/v1";
  r.AddLogLabel(
      [](const HttpContext&, const std::vector<std::string>& seg) -> std::optional<std::string> {
        if (seg.size() >= 3 && seg[0] == kPrefix && seg[1] == "sandboxes") return seg[2];
        if (seg.size() >= 4 && seg[0] == kPrefix && seg[2] == "sandboxes") return seg[3];
        return std::nullopt;
      });

  // (Handlers that make an Error are coroutines themselves, so it lives
  // as long as the answer that refers to it.)
  Mount outer;
  outer.prefix = root;
  outer.not_found = [](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
    const Error e = MakeError(Code::kNotFound, "no OpenSandbox route for " + ctx.path());
    co_await SendError(ctx, e);
  };
  outer.method_not_allowed = outer.not_found;
  r.AddMount(std::move(outer));
  RegisterProxy(r);

  Mount lifecycle;
  lifecycle.prefix = v1;
  lifecycle.guard = [this](HttpContext& ctx) { return Admit(ctx); };
  lifecycle.scope = [this](HttpContext& ctx) { return Scope(ctx); };
  lifecycle.not_found = [](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
    const Error e = MakeError(
        Code::kNotFound,
        "no OpenSandbox route " + std::string(http::to_string(ctx.method())) + " " + ctx.path());
    co_await SendError(ctx, e);
  };
  lifecycle.method_not_allowed = lifecycle.not_found;
  r.AddMount(std::move(lifecycle));

  // The SDK's create-latency telemetry: nothing here wants it.
  r.Add(V::post, v1 + "/metrics/events",
        [this](HttpContext& c, const RouteMatch&) -> asio::awaitable<void> {
          (void)co_await c.ReadBody(json_limit_);
          co_await c.SendEmpty(204);
        });
  r.Add(V::post, v1 + "/sandboxes",
        [this](HttpContext& c, const RouteMatch&) { return Create(c, c.principal().owner); });
  r.Add(V::get, v1 + "/sandboxes", [this](HttpContext& c, const RouteMatch&) { return List(c); });
  r.Add(V::get, v1 + "/sandboxes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return Get(c, m["id"]); });
  r.Add(V::delete_, v1 + "/sandboxes/{id}",
        [this](HttpContext& c, const RouteMatch& m) { return Kill(c, m["id"]); });
  r.Add(V::post, v1 + "/sandboxes/{id}/renew-expiration",
        [this](HttpContext& c, const RouteMatch& m) { return Renew(c, m["id"]); });
  r.Add(V::post, v1 + "/sandboxes/{id}/pause",
        [this](HttpContext& c, const RouteMatch& m) { return PauseResume(c, m["id"], true); });
  r.Add(V::post, v1 + "/sandboxes/{id}/resume",
        [this](HttpContext& c, const RouteMatch& m) { return PauseResume(c, m["id"], false); });
  r.Add(V::patch, v1 + "/sandboxes/{id}/metadata",
        [this](HttpContext& c, const RouteMatch& m) { return PatchMetadata(c, m["id"]); });
  r.Add(V::get, v1 + "/sandboxes/{id}/endpoints/{port}",
        [this](HttpContext& c, const RouteMatch& m) { return Endpoint(c, m["id"], m["port"]); });
  // The server-routed Credential Vault (the same as the sidecar's).
  auto vault = [this](HttpContext& c, const RouteMatch& m) -> asio::awaitable<void> {
    // seg: "opensandbox", "v1", "sandboxes", id, "credential-vault", rest...
    const std::vector<std::string> rest(m.seg.begin() + 5, m.seg.end());
    co_await CredentialVault(c, m["id"], rest);
  };
  for (const char* p : {"/credential-vault", "/credential-vault/credentials",
                        "/credential-vault/credentials/{name}", "/credential-vault/bindings",
                        "/credential-vault/bindings/{name}"}) {
    r.Add(V::get, v1 + "/sandboxes/{id}" + p, vault);
  }
  r.Add(V::post, v1 + "/sandboxes/{id}/credential-vault", vault);
  r.Add(V::patch, v1 + "/sandboxes/{id}/credential-vault", vault);
  r.Add(V::delete_, v1 + "/sandboxes/{id}/credential-vault", vault);
  // Snapshots: RouteSnapshots gives its own answer to other methods.
  auto snapshots = [this](HttpContext& c, const RouteMatch& m) -> asio::awaitable<void> {
    const std::vector<std::string> s(m.seg.begin() + 2, m.seg.end());
    co_await RouteSnapshots(c, s, c.principal().owner);
  };
  r.Add(V::post, v1 + "/sandboxes/{id}/snapshots", snapshots);
  r.Add(kAnyMethod, v1 + "/sandboxes/{id}/snapshots", snapshots);
  r.Add(V::get, v1 + "/snapshots", snapshots);
  r.Add(kAnyMethod, v1 + "/snapshots", snapshots);
  r.Add(V::get, v1 + "/snapshots/{id}", snapshots);
  r.Add(V::delete_, v1 + "/snapshots/{id}", snapshots);
  r.Add(kAnyMethod, v1 + "/snapshots/{id}", snapshots);
}

}  // namespace hutch::api::opensandbox
