// envd, the in-sandbox API, reached at /e2b/... with E2b-Sandbox-Id: which
// sandbox, its access token, the calling user, and the Connect RPC call
// decoded (unary JSON or one request envelope of a server stream).
#include "api/e2b/connect_stream.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_auth.h"
#include "auth/sandbox_token.h"

namespace hutch::api::e2b {

namespace {

// The envd answer for a sandbox that cannot be reached, as E2B's proxy
// gives it (502); the SDK takes 502 for "sandbox not running".
asio::awaitable<void> SendUnreachable(HttpContext& ctx, const std::string& why, bool rpc) {
  Error e = MakeError(Code::kSandboxNotRunning, why);
  ctx.NoteError(e);
  nlohmann::json body = rpc ? nlohmann::json{{"code", "unavailable"}, {"message", why}}
                            : nlohmann::json{{"code", 502}, {"message", why}};
  co_await ctx.SendJson(502, body);
}

bool IsStreaming(const std::string& service, const std::string& method) {
  return (service == "process.Process" && (method == "Start" || method == "Connect")) ||
         (service == "filesystem.Filesystem" && method == "WatchDir");
}

// A small positive integer header (Connect-Timeout-Ms: at most 10 digits).
std::optional<int64_t> IntHeader(const std::string& v) {
  if (v.empty() || v.size() > 10) return std::nullopt;
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::string MediaType(std::string ct) {
  size_t semi = ct.find(';');
  if (semi != std::string::npos) ct.resize(semi);
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  for (auto& c : ct) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ct;
}

}  // namespace

asio::awaitable<void> E2bApi::HandleEnvd(HttpContext& ctx, const std::vector<std::string>& seg) {
  const std::string id = ctx.Header("E2b-Sandbox-Id");
  const bool rpc = seg.size() == 3;
  auto rec = mgr_->Get(id);
  if (!rec.ok() || rec->status == SandboxStatus::kStopped || rec->status == SandboxStatus::kFailed)
    co_return co_await SendUnreachable(ctx, "sandbox " + id + " not found", rpc);
  if (seg.size() == 2 && seg[1] == "health") {
    if (rec->status != SandboxStatus::kRunning)
      co_return co_await SendUnreachable(ctx, "sandbox " + id + " is " + StatusName(rec->status),
                                         false);
    co_return co_await ctx.SendEmpty(204);
  }
  const std::string token = ctx.Header("X-Access-Token");
  if (!creds_->SandboxTokenMatches(auth::SandboxTokenKind::kE2bEnvd, token, rec->owner_key,
                                   rec->id)) {
    Error e = MakeError(Code::kUnauthorized, "missing or wrong X-Access-Token for sandbox " + id);
    if (rpc) co_return co_await SendUnary(ctx, e);
    ctx.NoteError(e);
    const nlohmann::json body = {{"code", 401}, {"message", e.message}};
    co_return co_await ctx.SendJson(401, body);
  }
  ctx.MarkAuthenticated();
  // envd calls spend the tokens of the key that owns the sandbox, as its
  // /v1 calls would.
  if (int wait = creds_->Charge(rec->owner_key); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited,
                        "rate limit of the sandbox owner's key exceeded; retry after " +
                            std::to_string(wait) + " s");
    if (rpc) co_return co_await SendUnary(ctx, e);
    ctx.NoteError(e);
    const nlohmann::json body = {{"code", 429}, {"message", e.message}};
    co_return co_await ctx.SendJson(429, body);
  }
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok())
    co_return co_await SendUnreachable(ctx, "sandbox " + id + " is " + StatusName(rec->status),
                                       rpc);
  std::string user = BasicAuthUser(ctx.Header("Authorization"));
  if (user.empty()) user = kDefaultUser;

  if (seg.size() == 2 && seg[1] == "files") {
    if (ctx.method() == http::verb::get) co_return co_await FilesGet(ctx, *sb, user);
    if (ctx.method() == http::verb::post) co_return co_await FilesPost(ctx, *sb, user);
  }
  if (!rpc) {
    ctx.NoteError(MakeError(Code::kNotFound, "no envd route"));
    const nlohmann::json body = {{"code", 404}, {"message", "no envd route for " + ctx.path()}};
    co_return co_await ctx.SendJson(404, body);
  }

  const std::string& service = seg[1];
  const std::string& method = seg[2];
  const bool streaming = IsStreaming(service, method);
  ConnectStream early(ctx);
  auto fail = [&](const Error& e) -> asio::awaitable<void> {
    if (streaming) co_return co_await early.End(&e);
    co_await SendUnary(ctx, e);
  };
  if (ctx.method() != http::verb::post) {
    Error err = MakeError(Code::kMethodNotAllowed, "Connect calls are POST");
    co_return co_await fail(err);
  }
  const std::string ct = MediaType(ctx.Header("Content-Type"));
  const std::string want = streaming ? "application/connect+json" : "application/json";
  if (ct != want) {
    // Connect answers an unsupported codec with 415 before anything else.
    Error e =
        MakeError(Code::kNotSupported, "content type '" + ct + "' is not supported; hutch speaks " +
                                           want + " (the SDK's JSON codec)");
    ctx.NoteError(e);
    co_return co_await ctx.SendEmpty(415);
  }
  auto body = co_await ctx.ReadBody(json_limit_ + 5);
  if (!body.ok()) co_return co_await fail(body.error());
  std::string payload = std::move(*body);
  if (streaming) {
    EnvelopeReader reader(json_limit_);
    reader.Feed(payload);
    auto env = reader.Next();
    if (!env.ok()) co_return co_await fail(env.error());
    if (!*env || reader.pending() != 0) {
      Error err =
          MakeError(Code::kInvalidRequest, "a server-streaming request is exactly one envelope");
      co_return co_await fail(err);
    }
    if ((*env)->flags & kEnvelopeCompressed) {
      Error err = MakeError(Code::kNotSupported, "compressed envelopes are not supported");
      co_return co_await fail(err);
    }
    payload = std::move((*env)->payload);
  }
  EnvdCall call;
  call.sb = *sb;
  call.user = user;
  std::string parse_error;
  try {
    call.request = payload.empty() ? nlohmann::json::object() : nlohmann::json::parse(payload);
  } catch (const nlohmann::json::exception& e) {
    parse_error = e.what();
  }
  if (!parse_error.empty()) {
    Error err = MakeError(Code::kInvalidRequest, "malformed JSON message: " + parse_error);
    co_return co_await fail(err);
  }
  if (!call.request.is_object()) {
    Error err = MakeError(Code::kInvalidRequest, "a message must be a JSON object");
    co_return co_await fail(err);
  }
  if (auto t = IntHeader(ctx.Header("Connect-Timeout-Ms")); t && *t > 0)
    call.timeout = std::chrono::milliseconds(*t);
  if (auto k = IntHeader(ctx.Header("Keepalive-Ping-Interval")); k && *k > 0)
    call.keepalive = std::chrono::seconds(*k);

  if (service == "process.Process") {
    if (method == "Start") co_return co_await ProcessStart(ctx, call);
    if (method == "Connect") co_return co_await ProcessConnect(ctx, call);
    auto r = co_await ProcessUnary(method, call);
    co_return co_await SendUnary(ctx, r);
  }
  if (service == "filesystem.Filesystem") {
    if (method == "WatchDir") co_return co_await WatchDir(ctx, call);
    auto r = co_await FilesystemUnary(method, call);
    co_return co_await SendUnary(ctx, r);
  }
  {
    Error err = MakeError(Code::kNotSupported,
                          "envd service '" + service + "' is not implemented by hutch");
    co_await fail(err);
  }
}

}  // namespace hutch::api::e2b
