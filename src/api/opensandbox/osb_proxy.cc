// The server proxy: /opensandbox/sandboxes/{id}/proxy/{port}/... serves
// the in-sandbox APIs the SDK was pointed at by an endpoint: execd on
// 44772 and the egress sidecar on 18080, both answered by hutchd itself
// over the sandbox's agent. Credentials: the sandbox's access token
// (X-EXECD-ACCESS-TOKEN, handed out with the endpoint) or a valid API key.
#include "api/e2b/e2b_auth.h"
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

using V = http::verb;

bool Is(const std::vector<std::string>& s, std::initializer_list<const char*> want) {
  if (s.size() != want.size()) return false;
  size_t i = 0;
  for (const char* w : want)
    if (s[i++] != w) return false;
  return true;
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::HandleProxy(HttpContext& ctx, const std::vector<std::string>& seg,
                                                  const std::string& key_hash) {
  // seg: "opensandbox", "sandboxes", id, "proxy", port, rest...
  const std::string& id = seg[2];
  const std::string& port = seg[4];
  const std::vector<std::string> s(seg.begin() + 5, seg.end());
  auto rec = mgr_->Get(id);
  if (!rec.ok() || rec->status == SandboxStatus::kStopped) {
    Error e = MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
    co_return co_await SendError(ctx, e);
  }
  const std::string token = ctx.Header(kAccessTokenHeader);
  const bool token_ok = !token.empty() && e2b::SecretEquals(token, ExecdAccessToken(rec->owner_key, id));
  if (!token_ok && key_hash.empty()) {
    Error e = MakeError(Code::kUnauthorized, std::string("missing or wrong ") + kAccessTokenHeader + " for sandbox " +
                                                 id + " (the endpoint's headers carry it)");
    co_return co_await SendError(ctx, e);
  }
  // In-sandbox calls spend the tokens of the key that owns the sandbox.
  if (int wait = rate_limit_ ? rate_limit_(rec->owner_key) : 0; wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited, "rate limit of the sandbox owner's key exceeded; retry after " +
                                                std::to_string(wait) + " s");
    co_return co_await SendError(ctx, e);
  }
  if (port == std::to_string(kEgressPort)) co_return co_await Egress(ctx, *rec, s);
  if (port != std::to_string(kExecdPort)) {
    Error e = MakeError(Code::kNotSupported, "port " + port + " is not served by hutch's proxy (44772, 18080 are)");
    co_return co_await SendError(ctx, e);
  }
  // Everything below needs the sandbox running (an idle-paused one is
  // resumed by GetRunning).
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return co_await SendError(ctx, sb.error());
  const V m = ctx.method();
  if (Is(s, {"ping"})) co_return co_await ctx.SendText(200, "text/plain", "pong");
  if (Is(s, {"command"})) {
    if (m == V::post) co_return co_await RunCommand(ctx, *sb);
    if (m == V::delete_) co_return co_await InterruptCommand(ctx, *sb);
  }
  if (s.size() == 3 && s[0] == "command" && s[1] == "status" && m == V::get)
    co_return co_await CommandStatus(ctx, *sb, s[2]);
  if (s.size() == 3 && s[0] == "command" && s[2] == "logs" && m == V::get)
    co_return co_await CommandLogs(ctx, *sb, s[1]);
  if (Is(s, {"session"}) && m == V::post) co_return co_await CreateSession(ctx, *sb);
  if (s.size() == 3 && s[0] == "session" && s[2] == "run" && m == V::post)
    co_return co_await RunInSession(ctx, *sb, s[1]);
  if (s.size() == 2 && s[0] == "session" && m == V::delete_) co_return co_await DeleteSession(ctx, *sb, s[1]);
  if (!s.empty() && (s[0] == "files" || s[0] == "directories")) co_return co_await Files(ctx, *sb, s);
  if (Is(s, {"metrics"}) && m == V::get) co_return co_await Metrics(ctx, *sb, false);
  if (Is(s, {"metrics", "watch"}) && m == V::get) co_return co_await Metrics(ctx, *sb, true);
  if (!s.empty() && (s[0] == "code" || s[0] == "v1")) {
    Error e = MakeError(Code::kNotSupported, "execd's /" + s[0] +
                                                 " API (code interpreter, isolated sessions) is not supported by "
                                                 "hutch (docs/compat-opensandbox.md)");
    co_return co_await SendError(ctx, e);
  }
  Error e = MakeError(Code::kNotFound, "no execd route " + std::string(http::to_string(m)) + " " + ctx.path());
  co_await SendError(ctx, e);
}

}  // namespace hutch::api::opensandbox
