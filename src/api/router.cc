// Request dispatch: unauthenticated probes, bearer auth for /v1, the route
// table, and JSON errors for every path that matches nothing.
#include <spdlog/spdlog.h>

#include "api/api.h"
#include "api/e2b/e2b_auth.h"
#include "common/sha256.h"

namespace hutch::api {

namespace {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// Routes of the contract that this build answers with not_supported.

// The token of "Authorization: Bearer <token>", empty when absent.
std::string BearerToken(const HttpContext& ctx) {
  std::string auth = ctx.Header("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() <= prefix.size() || !beast::iequals(auth.substr(0, prefix.size()), prefix)) return {};
  return auth.substr(prefix.size());
}

// A client-chosen string (a decoded path, an id from it) as one log token:
// spaces, quotes, backslashes, '%', control and non-ASCII bytes are
// percent-encoded, so it cannot split into fake fields or lines.
std::string LogSafe(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7F || c == '"' || c == '\\' || c == '%') {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

Error MethodNotAllowed(http::verb v) {
  return MakeError(Code::kMethodNotAllowed, "method " + std::string(http::to_string(v)) + " not allowed here");
}

std::string Api::BearerKeyHash(const HttpContext& ctx) {
  std::string token = BearerToken(ctx);
  return token.empty() ? std::string() : Sha256Hex(token);
}

bool Api::Authorized(const HttpContext& ctx) const {
  // Compared as hashes: equal-length strings, and no key in memory.
  std::string hash = BearerKeyHash(ctx);
  if (hash.empty()) return false;
  bool ok = false;
  for (const auto& k : cfg_.api_key_hashes) ok |= ConstantTimeEquals(k, hash);
  return ok;
}

std::string Api::MatchKeyHash(const std::vector<std::string>& candidates) const {
  std::string found;
  for (const auto& c : candidates) {
    std::string hash = Sha256Hex(c);
    bool ok = false;
    for (const auto& k : cfg_.api_key_hashes) ok |= ConstantTimeEquals(k, hash);
    if (ok && found.empty()) found = hash;
  }
  return found;
}

int Api::RateLimitWait(const std::string& key_hash) {
  auto d = limiter_.Take(limiter_.KeyId(key_hash), std::chrono::steady_clock::now());
  return d.allowed ? 0 : std::max(1, static_cast<int>(d.retry_after_seconds));
}

asio::awaitable<void> Api::RouteE2b(HttpContext& ctx, const std::vector<std::string>& seg) {
  // envd calls name their sandbox in a header and authenticate with its
  // access token (checked by the dialect); the control plane uses X-API-Key.
  if (!ctx.Header("E2b-Sandbox-Id").empty()) co_return co_await e2b_.HandleEnvd(ctx, seg);
  const std::string presented = ctx.Header("X-API-Key");
  const std::string hash = MatchKeyHash(e2b::KeyCandidates(presented));
  if (hash.empty()) {
    Error e = MakeError(Code::kUnauthorized, "missing or invalid API key (X-API-Key: a hutch key, or e2b_<hex> for hk_<hex>)");
    co_return co_await e2b::E2bApi::SendControlError(ctx, e);
  }
  if (int wait = RateLimitWait(hash); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited,
                        "rate limit of this API key exceeded; retry after " + std::to_string(wait) + " s");
    co_return co_await e2b::E2bApi::SendControlError(ctx, e);
  }
  co_await e2b_.HandleControl(ctx, seg, hash);
}

asio::awaitable<void> Api::RouteOpenSandbox(HttpContext& ctx, const std::vector<std::string>& seg) {
  // The lifecycle API authenticates with OPEN-SANDBOX-API-KEY; the proxy
  // routes with the sandbox's access token (or a key), checked by the dialect.
  const std::string presented = ctx.Header("OPEN-SANDBOX-API-KEY");
  const std::vector<std::string> candidates = presented.empty() ? std::vector<std::string>{}
                                                                : std::vector<std::string>{presented};
  const std::string hash = MatchKeyHash(candidates);
  if (seg.size() >= 5 && seg[1] == "sandboxes" && seg[3] == "proxy")
    co_return co_await osb_.HandleProxy(ctx, seg, hash);
  if (seg.size() < 2 || seg[1] != "v1") {
    Error e = MakeError(Code::kNotFound, "no OpenSandbox route for " + ctx.path());
    co_return co_await opensandbox::OpenSandboxApi::SendError(ctx, e);
  }
  if (hash.empty()) {
    // OpenSandbox's own codes for these two, which its SDKs show as is.
    ctx.NoteError(MakeError(Code::kUnauthorized, "api key"));
    const nlohmann::json body = {
        {"code", presented.empty() ? "MISSING_API_KEY" : "INVALID_API_KEY"},
        {"message", presented.empty() ? "OPEN-SANDBOX-API-KEY header is required (a hutch API key)"
                                      : "OPEN-SANDBOX-API-KEY is not a valid hutch API key"}};
    co_return co_await ctx.SendJson(401, body);
  }
  if (int wait = RateLimitWait(hash); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    Error e = MakeError(Code::kRateLimited,
                        "rate limit of this API key exceeded; retry after " + std::to_string(wait) + " s");
    co_return co_await opensandbox::OpenSandboxApi::SendError(ctx, e);
  }
  co_await osb_.HandleLifecycle(ctx, seg, hash);
}

asio::awaitable<void> Api::Handle(HttpContext& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.set_error_observer([this](const Error& e) { metrics_.CountError(e.code); });
  bool threw = false;
  try {
    co_await Dispatch(ctx);
  } catch (const std::exception& e) {
    // A bug, not a client error: logged with the request id, answered 500.
    spdlog::error("handler_exception path={} request_id={} what=\"{}\"", LogSafe(ctx.path()), ctx.request_id(),
                  e.what());
    threw = true;
  }
  if (threw) {
    if (ctx.responded()) ctx.CloseAfterResponse();  // a response broke off half-way
    else co_await ctx.SendError(MakeError(Code::kInternal, "internal error"));
  }
  std::string method = ctx.method() == http::verb::unknown ? "other" : std::string(http::to_string(ctx.method()));
  metrics_.CountRequest(method, ctx.status_sent());
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  auto seg = ctx.segments();
  std::string sandbox;
  if (auto ph = PortProxy::ParsePortHost(ctx.Header("Host"))) sandbox = " sandbox=" + ph->id;
  else if (seg.size() >= 3 && seg[0] == "v1" && seg[1] == "sandboxes") sandbox = " sandbox=" + LogSafe(seg[2]);
  else if (seg.size() >= 3 && seg[0] == opensandbox::kPrefix && seg[1] == "sandboxes")
    sandbox = " sandbox=" + LogSafe(seg[2]);
  else if (seg.size() >= 4 && seg[0] == opensandbox::kPrefix && seg[2] == "sandboxes")
    sandbox = " sandbox=" + LogSafe(seg[3]);
  else if (!seg.empty() && seg[0] == "e2b" && !ctx.Header("E2b-Sandbox-Id").empty())
    sandbox = " sandbox=" + LogSafe(ctx.Header("E2b-Sandbox-Id"));
  spdlog::info("http method={} path={} status={} request_id={}{} duration_ms={}", method, LogSafe(ctx.path()),
               ctx.status_sent(), ctx.request_id(), sandbox, ms);
}

void Api::CountMalformedRequest(int status, Code code) {
  metrics_.CountRequest("other", status);
  metrics_.CountError(code);
}

asio::awaitable<void> Api::Dispatch(HttpContext& ctx) {
  auto seg = ctx.segments();
  // A Host naming a sandbox's port (E2B getHost) owns every path: the
  // request is the sandbox server's, whatever it looks like.
  if (auto ph = PortProxy::ParsePortHost(ctx.Header("Host"))) co_return co_await PortsByHost(ctx, ph->id, ph->port);
  if (IsE2bPortRequest(ctx, seg)) co_return co_await PortsByE2bHeader(ctx);
  // A relayed target's query (and path after the port) is the sandbox
  // server's business, not checked here.
  if (!ctx.query_ok() && !IsV1PortsPath(seg)) {
    co_await ctx.SendError(MakeError(Code::kInvalidRequest, "malformed percent-encoding in URL"));
  } else if (seg.size() == 1 && seg[0] == "healthz") {
    if (ctx.method() != http::verb::get && ctx.method() != http::verb::head)
      co_await ctx.SendError(MethodNotAllowed(ctx.method()));
    else
    {
      nlohmann::json health = {{"status", "ok"},
                               {"sandboxes_running", mgr_->running_count()},
                               {"capabilities", cfg_.capabilities}};
      co_await ctx.SendJson(200, health);
    }
  } else if (seg.size() == 1 && seg[0] == "metrics") {
    if (ctx.method() != http::verb::get) co_await ctx.SendError(MethodNotAllowed(ctx.method()));
    else co_await ServeMetrics(ctx);
  } else if (!seg.empty() && seg[0] == "v1") {
    // Authentication comes first: a request without a valid key is refused
    // before it can spend the tokens of a real key.
    if (!Authorized(ctx)) {
      co_await ctx.SendError(MakeError(Code::kUnauthorized, "missing or invalid API key (Authorization: Bearer <key>)"));
    } else if (auto d = limiter_.Take(limiter_.KeyId(BearerKeyHash(ctx)), std::chrono::steady_clock::now());
               !d.allowed) {
      // (Buckets are keyed by the key's hash, so the E2B dialect, which
      // knows a sandbox's owner only by hash, spends the same tokens.)
      ctx.AddHeader("Retry-After", std::to_string(d.retry_after_seconds));
      co_await ctx.SendError(MakeError(Code::kRateLimited, "rate limit of this API key exceeded; retry after " +
                                                               std::to_string(d.retry_after_seconds) + " s"));
    } else {
      co_await RouteV1(ctx, seg);
    }
  } else if (!seg.empty() && seg[0] == "e2b") {
    co_await RouteE2b(ctx, seg);
  } else if (!seg.empty() && seg[0] == opensandbox::kPrefix) {
    co_await RouteOpenSandbox(ctx, seg);
  } else {
    co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
  }
}

asio::awaitable<void> Api::RouteV1(HttpContext& ctx, const std::vector<std::string>& seg) {
  using V = http::verb;
  V m = ctx.method();
  const size_t n = seg.size();
  if (n >= 2 && seg[1] == "sandboxes") {
    if (n == 2) {
      if (m == V::post) co_return co_await CreateSandbox(ctx);
      if (m == V::get) co_return co_await ListSandboxes(ctx);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    const std::string& id = seg[2];
    if (n == 3) {
      if (m == V::get) co_return co_await GetSandbox(ctx, id);
      if (m == V::delete_) co_return co_await DeleteSandbox(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    const std::string& sub = seg[3];
    if (n == 4 && sub == "exec") {
      if (m == V::post) co_return co_await Exec(ctx, id, false);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 5 && sub == "exec" && seg[4] == "stream") {
      if (m == V::post) co_return co_await Exec(ctx, id, true);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && sub == "ttl") {
      if (m == V::post) co_return co_await SetTtl(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && sub == "snapshots") {
      if (m == V::post) co_return co_await CreateSnapshot(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && sub == "fork") {
      if (m == V::post) co_return co_await ForkSandbox(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && (sub == "pause" || sub == "resume")) {
      if (m == V::post) co_return co_await PauseResume(ctx, id, sub == "pause");
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && sub == "metrics") {
      if (m == V::get) co_return co_await SandboxMetrics(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 4 && sub == "fs") {
      if (m == V::get) co_return co_await FileGet(ctx, id);
      if (m == V::put) co_return co_await FilePut(ctx, id);
      if (m == V::delete_) co_return co_await FileDelete(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
    if (n == 5 && sub == "fs") {
      const std::string& op = seg[4];
      if (op == "list" || op == "stat") {
        if (m == V::get) co_return co_await FileList(ctx, id, op == "stat");
        co_return co_await ctx.SendError(MethodNotAllowed(m));
      }
      if (op == "mkdir" || op == "move") {
        if (m != V::post) co_return co_await ctx.SendError(MethodNotAllowed(m));
        if (op == "mkdir") co_return co_await FileMkdir(ctx, id);
        co_return co_await FileMove(ctx, id);
      }
    }
    if (sub == "processes") co_return co_await Processes(ctx, id, seg);
    if (n == 4 && sub == "pty") co_return co_await Pty(ctx, id);
    if (sub == "ports") co_return co_await Ports(ctx, id, seg);
    if (n == 4 && sub == "network") {
      if (m == V::get) co_return co_await GetNetwork(ctx, id);
      if (m == V::put) co_return co_await PutNetwork(ctx, id);
      co_return co_await ctx.SendError(MethodNotAllowed(m));
    }
  }
  if (n >= 2 && seg[1] == "snapshots") co_return co_await RouteSnapshots(ctx, seg);
  if (n >= 2 && seg[1] == "volumes") co_return co_await RouteVolumes(ctx, seg);
  if (n >= 2 && seg[1] == "templates") co_return co_await RouteTemplates(ctx, seg);
  if (n >= 2 && seg[1] == "template-aliases") co_return co_await RouteTemplateAliases(ctx, seg);
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

asio::awaitable<void> Api::ServeMetrics(HttpContext& ctx) {
  // Values owned elsewhere are read at scrape time, so they cannot drift.
  auto by_status = mgr_->CountByStatus();
  for (auto st : {SandboxStatus::kStarting, SandboxStatus::kRunning, SandboxStatus::kPaused, SandboxStatus::kStopped,
                  SandboxStatus::kFailed})
    metrics_.sandboxes.With({StatusName(st)}).Set(static_cast<double>(by_status[st]));
  metrics_.sandboxes_running.Set(static_cast<double>(mgr_->running_count()));
  if (const auto* net = mgr_->network()) {
    metrics_.network_slots.With({"warm"}).Set(static_cast<double>(net->warm()));
    metrics_.network_slots.With({"leased"}).Set(static_cast<double>(net->in_use()));
  }
  metrics_.rate_limit_buckets.Set(static_cast<double>(limiter_.bucket_count()));
  auto up = std::chrono::steady_clock::now() - metrics_.started;
  metrics_.uptime_seconds.Set(std::chrono::duration<double>(up).count());
  co_await ctx.SendText(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.registry.Render());
}

}  // namespace hutch::api
