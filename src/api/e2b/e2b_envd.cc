// envd, the in-sandbox API, reached at /e2b/... with E2b-Sandbox-Id or by
// a Host of 49983-{id}.<domain>: which sandbox, its access token, the
// calling user, and the Connect RPC call decoded (a unary message or the
// one request envelope of a server stream, in either codec, gzip or not)
// into the proto3 JSON the handlers read.
#include "api/e2b/connect_stream.h"
#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_auth.h"
#include "api/e2b/file_signature.h"
#include "api/e2b/gzip_stream.h"
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

// A Connect request body's one message, uncompressed: a unary body as is
// (Content-Encoding), a stream's single envelope (Connect-Content-Encoding
// and the envelope's compressed flag). gzip is the one compression hutch
// accepts, as every Connect implementation does; others are unimplemented.
Result<std::string> RequestMessage(const HttpContext& ctx, std::string body, bool streaming,
                                   size_t limit) {
  const std::string encoding =
      MediaType(ctx.Header(streaming ? "Connect-Content-Encoding" : "Content-Encoding"));
  if (!encoding.empty() && encoding != "identity" && encoding != "gzip")
    return MakeError(Code::kNotSupported,
                     "message compression '" + encoding + "' is not supported (gzip is)");
  bool compressed = encoding == "gzip";
  if (streaming) {
    EnvelopeReader reader(limit);
    reader.Feed(body);
    auto env = reader.Next();
    if (!env.ok()) return env.error();
    if (!*env || reader.pending() != 0)
      return MakeError(Code::kInvalidRequest, "a server-streaming request is exactly one envelope");
    compressed = ((*env)->flags & kEnvelopeCompressed) != 0;
    if (compressed && encoding != "gzip")
      return MakeError(Code::kInvalidRequest,
                       "a compressed envelope without Connect-Content-Encoding");
    body = std::move((*env)->payload);
  }
  if (!compressed) {
    if (body.size() > limit)
      return MakeError(Code::kPayloadTooLarge, "message of " + std::to_string(body.size()) +
                                                   " bytes exceeds " + std::to_string(limit));
    return body;
  }
  return GunzipBounded(body, limit);
}

}  // namespace

asio::awaitable<void> E2bApi::HandleEnvd(HttpContext& ctx, const std::string& id,
                                         const std::vector<std::string>& seg) {
  const bool rpc = seg.size() == 2;
  auto rec = mgr_->Get(id);
  if (!rec.ok() || rec->status == SandboxStatus::kStopped || rec->status == SandboxStatus::kFailed)
    co_return co_await SendUnreachable(ctx, "sandbox " + id + " not found", rpc);
  if (seg.size() == 1 && seg[0] == "health") {
    if (rec->status != SandboxStatus::kRunning)
      co_return co_await SendUnreachable(ctx, "sandbox " + id + " is " + StatusName(rec->status),
                                         false);
    co_return co_await ctx.SendEmpty(204);
  }
  const std::string token = ctx.Header("X-Access-Token");
  const bool files = seg.size() == 1 && seg[0] == "files";
  Status access = Status{};
  if (files && token.empty() && ctx.Query("signature")) {
    // A signed file URL (file_signature.h): the SDK signed it with the
    // token the sandbox's owner was given.
    const FileOperation op =
        ctx.method() == http::verb::get ? FileOperation::kRead : FileOperation::kWrite;
    access = CheckFileSignature(
        *ctx.Query("signature"), ctx.Query("signature_expiration").value_or(""),
        ctx.Query("path").value_or(""), op, ctx.Query("username").value_or(""),
        creds_->SandboxToken(auth::SandboxTokenKind::kE2bEnvd, rec->owner_key, rec->id),
        std::chrono::system_clock::now());
  } else if (!creds_->SandboxTokenMatches(auth::SandboxTokenKind::kE2bEnvd, token, rec->owner_key,
                                          rec->id)) {
    access = MakeError(Code::kUnauthorized, "missing or wrong X-Access-Token for sandbox " + id);
  }
  if (!access.ok()) {
    const Error& e = access.error();
    if (rpc) co_return co_await SendUnary(ctx, e, ConnectCodec());
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
    if (rpc) co_return co_await SendUnary(ctx, e, ConnectCodec());
    ctx.NoteError(e);
    const nlohmann::json body = {{"code", 429}, {"message", e.message}};
    co_return co_await ctx.SendJson(429, body);
  }
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok())
    co_return co_await SendUnreachable(ctx, "sandbox " + id + " is " + StatusName(rec->status),
                                       rpc);
  // No user named: the template's default user (E2B: the last setUser of
  // its build), else E2B's `user`.
  std::string user = BasicAuthUser(ctx.Header("Authorization"));
  if (user.empty()) user = rec->user.empty() ? kDefaultUser : rec->user;

  if (files) {
    if (ctx.method() == http::verb::get) co_return co_await FilesGet(ctx, *sb, user);
    if (ctx.method() == http::verb::post) co_return co_await FilesPost(ctx, *sb, user);
  }
  if (!rpc) {
    ctx.NoteError(MakeError(Code::kNotFound, "no envd route"));
    const nlohmann::json body = {{"code", 404}, {"message", "no envd route for " + ctx.path()}};
    co_return co_await ctx.SendJson(404, body);
  }

  const std::string& service = seg[0];
  const std::string& method = seg[1];
  const auto* descriptor = ConnectCodec::FindMethod(service, method);
  // A method the .proto files lack is unary here: its handler (or the
  // fallback below) answers unimplemented.
  const bool streaming = descriptor != nullptr && ConnectCodec::ServerStreaming(descriptor);
  const std::string ct = MediaType(ctx.Header("Content-Type"));
  const auto kind = ConnectCodec::KindOf(ct, streaming);
  // The call's codec once the media type names one the method has (the
  // error-only stream of an early failure carries the request's
  // Content-Type, which connect-go checks); JSON before that.
  const bool known = kind && (*kind == ConnectCodecKind::kJson || descriptor != nullptr);
  const ConnectCodec codec = known ? ConnectCodec(*kind, descriptor) : ConnectCodec();
  ConnectStream early(ctx, codec);
  auto fail = [&](const Error& e) -> asio::awaitable<void> {
    if (streaming) co_return co_await early.End(&e);
    co_await SendUnary(ctx, e, codec);
  };
  if (ctx.method() != http::verb::post) {
    Error err = MakeError(Code::kMethodNotAllowed, "Connect calls are POST");
    co_return co_await fail(err);
  }
  if (!kind) {
    // Connect answers an unsupported codec with 415 before anything else.
    Error e = MakeError(Code::kNotSupported,
                        "content type '" + ct + "' is not supported here; hutch speaks " +
                            (streaming ? "application/connect+json and application/connect+proto"
                                       : "application/json and application/proto"));
    ctx.NoteError(e);
    co_return co_await ctx.SendEmpty(415);
  }
  if (!known) {
    Error err = MakeError(Code::kNotSupported, "envd method '" + service + "/" + method +
                                                   "' is not implemented by hutch");
    co_return co_await fail(err);
  }
  auto body = co_await ctx.ReadBody(json_limit_ + 5);
  if (!body.ok()) co_return co_await fail(body.error());
  auto payload = RequestMessage(ctx, std::move(*body), streaming, json_limit_);
  if (!payload.ok()) co_return co_await fail(payload.error());
  EnvdCall call;
  call.sb = *sb;
  call.user = user;
  call.codec = codec;
  auto request = codec.DecodeRequest(*payload);
  if (!request.ok()) co_return co_await fail(request.error());
  call.request = std::move(*request);
  if (auto t = IntHeader(ctx.Header("Connect-Timeout-Ms")); t && *t > 0)
    call.timeout = std::chrono::milliseconds(*t);
  if (auto k = IntHeader(ctx.Header("Keepalive-Ping-Interval")); k && *k > 0)
    call.keepalive = std::chrono::seconds(*k);

  if (service == "process.Process") {
    if (method == "Start") co_return co_await ProcessStart(ctx, call);
    if (method == "Connect") co_return co_await ProcessConnect(ctx, call);
    auto r = co_await ProcessUnary(method, call);
    co_return co_await SendUnary(ctx, r, call.codec);
  }
  if (service == "filesystem.Filesystem") {
    if (method == "WatchDir") co_return co_await WatchDir(ctx, call);
    auto r = co_await FilesystemUnary(method, call);
    co_return co_await SendUnary(ctx, r, call.codec);
  }
  {
    Error err = MakeError(Code::kNotSupported,
                          "envd service '" + service + "' is not implemented by hutch");
    co_await fail(err);
  }
}

}  // namespace hutch::api::e2b
