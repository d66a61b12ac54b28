// The server proxy: /opensandbox/sandboxes/{id}/proxy/{port}/... serves
// the in-sandbox APIs the SDK was pointed at by an endpoint: execd on
// 44772 and the egress sidecar on 18080, both answered by hutchd itself
// over the sandbox's agent. Credentials: the sandbox's access token
// (X-EXECD-ACCESS-TOKEN, handed out with the endpoint) or a valid API key.
// Its routes are in the router's table like every other (osb_routes.cc),
// under a mount whose guard is AdmitProxy.
#include "api/opensandbox/osb_api.h"
#include "auth/sandbox_token.h"

namespace hutch::api::opensandbox {

namespace {

// seg: "opensandbox", "sandboxes", id, "proxy", port, rest...
const std::string& ProxiedId(const std::vector<std::string>& seg) { return seg[2]; }
const std::string& ProxiedPort(const std::vector<std::string>& seg) { return seg[4]; }
std::vector<std::string> ProxiedRest(const std::vector<std::string>& seg) {
  return std::vector<std::string>(seg.begin() + 5, seg.end());
}

}  // namespace

asio::awaitable<bool> OpenSandboxApi::AdmitProxy(HttpContext& ctx) {
  const auto seg = ctx.segments();
  const std::string& id = ProxiedId(seg);
  auto rec = mgr_->Get(id);
  if (!rec.ok() || rec->status == SandboxStatus::kStopped) {
    Error e = MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
    co_await SendError(ctx, e);
    co_return false;
  }
  const std::string token = ctx.Header(kAccessTokenHeader);
  const bool token_ok = creds_->SandboxTokenMatches(auth::SandboxTokenKind::kOpenSandboxExecd,
                                                    token, rec->owner_key, id);
  const auth::Principal who =
      token_ok ? auth::Principal{} : creds_->MatchKey(ctx.Header("OPEN-SANDBOX-API-KEY"));
  if (!token_ok && !who.empty() && !who.Owns(rec->owner_key)) {
    // Another tenant's sandbox: as if it did not exist (issue 32 #13).
    Error e = MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
    co_await SendError(ctx, e);
    co_return false;
  }
  if (!token_ok && who.empty()) {
    Error e = MakeError(Code::kUnauthorized, std::string("missing or wrong ") + kAccessTokenHeader +
                                                 " for sandbox " + id +
                                                 " (the endpoint's headers carry it)");
    co_await SendError(ctx, e);
    co_return false;
  }
  ctx.MarkAuthenticated();
  // In-sandbox calls spend the tokens of the key that owns the sandbox.
  if (int wait = creds_->Charge(rec->owner_key); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited,
                        "rate limit of the sandbox owner's key exceeded; retry after " +
                            std::to_string(wait) + " s");
    co_await SendError(ctx, e);
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> OpenSandboxApi::ProxyEgress(HttpContext& ctx, const RouteMatch& m) {
  auto rec = mgr_->Get(ProxiedId(m.seg));
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  const auto rest = ProxiedRest(m.seg);
  co_await Egress(ctx, *rec, rest);
}

asio::awaitable<void> OpenSandboxApi::ProxyExecd(HttpContext& ctx, const RouteMatch& m,
                                                 const ExecdHandler& h) {
  // Everything execd does needs the sandbox running (an idle-paused one
  // is resumed by GetRunning).
  auto sb = mgr_->GetRunning(ProxiedId(m.seg));
  if (!sb.ok()) co_return co_await SendError(ctx, sb.error());
  const auto rest = ProxiedRest(m.seg);
  co_await h(ctx, *sb, rest);
}

asio::awaitable<void> OpenSandboxApi::ProxyNoRoute(HttpContext& ctx, const RouteMatch& m) {
  const std::string& port = ProxiedPort(m.seg);
  if (port == std::to_string(kEgressPort)) co_return co_await ProxyEgress(ctx, m);
  if (port != std::to_string(kExecdPort)) {
    Error e = MakeError(Code::kNotSupported,
                        "port " + port + " is not served by hutch's proxy (44772, 18080 are)");
    co_return co_await SendError(ctx, e);
  }
  auto sb = mgr_->GetRunning(ProxiedId(m.seg));
  if (!sb.ok()) co_return co_await SendError(ctx, sb.error());
  Error e =
      MakeError(Code::kNotFound,
                "no execd route " + std::string(http::to_string(ctx.method())) + " " + ctx.path());
  co_await SendError(ctx, e);
}

void OpenSandboxApi::RegisterProxy(Router& r) {
  using V = http::verb;
  const std::string base = std::string("/") + kPrefix + "/sandboxes/{id}/proxy";
  Mount proxy;
  proxy.prefix = base + "/{port}";
  proxy.guard = [this](HttpContext& ctx) { return AdmitProxy(ctx); };
  proxy.not_found = [this](HttpContext& ctx, const RouteMatch& m) { return ProxyNoRoute(ctx, m); };
  proxy.method_not_allowed = proxy.not_found;
  r.AddMount(std::move(proxy));

  // The egress sidecar (osb_egress.cc answers its other paths too).
  const std::string egress = base + "/" + std::to_string(kEgressPort);
  auto to_egress = [this](HttpContext& ctx, const RouteMatch& m) { return ProxyEgress(ctx, m); };
  r.Add(V::get, egress + "/policy", to_egress);
  r.Add(V::patch, egress + "/policy", to_egress);
  r.Add(V::delete_, egress + "/policy", to_egress);
  for (const char* p : {"/credential-vault", "/credential-vault/credentials",
                        "/credential-vault/credentials/{name}", "/credential-vault/bindings",
                        "/credential-vault/bindings/{name}"}) {
    r.Add(V::get, egress + p, to_egress);
  }
  r.Add(V::post, egress + "/credential-vault", to_egress);
  r.Add(V::patch, egress + "/credential-vault", to_egress);
  r.Add(V::delete_, egress + "/credential-vault", to_egress);

  // execd.
  const std::string execd = base + "/" + std::to_string(kExecdPort);
  using Sb = std::shared_ptr<Sandbox>;
  using Rest = std::vector<std::string>;
  auto add = [&](V method, const std::string& path, ExecdHandler h, bool not_supported = false) {
    Route route{method, execd + path,
                [this, h = std::move(h)](HttpContext& ctx, const RouteMatch& m) {
                  return ProxyExecd(ctx, m, h);
                }};
    route.not_supported = not_supported;
    r.Add(std::move(route));
  };
  add(kAnyMethod, "/ping", [](HttpContext& c, Sb, const Rest&) -> asio::awaitable<void> {
    co_await c.SendText(200, "text/plain", "pong");
  });
  add(V::post, "/command",
      [this](HttpContext& c, Sb sb, const Rest&) { return RunCommand(c, sb); });
  add(V::delete_, "/command",
      [this](HttpContext& c, Sb sb, const Rest&) { return InterruptCommand(c, sb); });
  add(V::get, "/command/status/{cid}",
      [this](HttpContext& c, Sb sb, const Rest& s) { return CommandStatus(c, sb, s[2]); });
  add(V::get, "/command/{cid}/logs",
      [this](HttpContext& c, Sb sb, const Rest& s) { return CommandLogs(c, sb, s[1]); });
  add(V::post, "/session",
      [this](HttpContext& c, Sb sb, const Rest&) { return CreateSession(c, sb); });
  add(V::post, "/session/{sid}/run",
      [this](HttpContext& c, Sb sb, const Rest& s) { return RunInSession(c, sb, s[1]); });
  add(V::delete_, "/session/{sid}",
      [this](HttpContext& c, Sb sb, const Rest& s) { return DeleteSession(c, sb, s[1]); });
  auto files = [this](HttpContext& c, Sb sb, const Rest& s) { return Files(c, sb, s); };
  add(V::post, "/files/upload", files);
  add(V::get, "/files/download", files);
  add(V::get, "/files/info", files);
  add(V::get, "/files/search", files);
  add(V::post, "/files/permissions", files);
  add(V::post, "/files/mv", files);
  add(V::post, "/files/replace", files);
  add(V::delete_, "/files", files);
  add(V::get, "/directories/list", files);
  add(V::post, "/directories", files);
  add(V::delete_, "/directories", files);
  add(V::get, "/metrics",
      [this](HttpContext& c, Sb sb, const Rest&) { return Metrics(c, sb, false); });
  add(V::get, "/metrics/watch",
      [this](HttpContext& c, Sb sb, const Rest&) { return Metrics(c, sb, true); });
  // The code interpreter (osb_code.cc), for sandboxes from the
  // code-interpreter template.
  add(V::post, "/code", [this](HttpContext& c, Sb sb, const Rest&) { return RunCode(c, sb); });
  add(V::delete_, "/code",
      [this](HttpContext& c, Sb sb, const Rest&) { return InterruptCode(c, sb); });
  auto contexts = [this](HttpContext& c, Sb sb, const Rest& s) { return CodeContexts(c, sb, s); };
  add(V::post, "/code/context", contexts);
  add(V::get, "/code/contexts", contexts);
  add(V::delete_, "/code/contexts", contexts);
  add(V::get, "/code/contexts/{ctx}", contexts);
  add(V::delete_, "/code/contexts/{ctx}", contexts);
  auto unsupported = [](HttpContext& c, Sb, const Rest& s) -> asio::awaitable<void> {
    // The SDKs' files_with_identity(uid, gid) is /v1/filesystem/{uid}/{gid}/...
    const bool identity = s.size() > 1 && s[1] == "filesystem";
    const Error e = MakeError(
        Code::kNotSupported,
        identity ? "file calls with an explicit identity (execd's /v1/filesystem/{uid}/{gid}) are "
                   "not supported by hutch: its execd file calls run as root "
                   "(docs/compat-opensandbox.md)"
                 : "execd's /" + s[0] +
                       " API (isolated sessions) is not supported by hutch "
                       "(docs/compat-opensandbox.md)");
    co_await SendError(c, e);
  };
  add(kAnyMethod, "/v1/{rest*}", unsupported, true);
}

}  // namespace hutch::api::opensandbox
