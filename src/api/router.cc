// Request dispatch: unauthenticated probes, bearer auth for /v1, the route
// table, and JSON errors for every path that matches nothing.
#include <spdlog/spdlog.h>

#include "api/api.h"

namespace hutch::api {

namespace {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

// Routes of the contract that this build answers with not_supported.
bool IsLaterRoute(const std::string& sub) {
  static const char* const kLater[] = {"pause", "resume", "fork", "snapshots", "network"};
  for (const char* l : kLater)
    if (sub == l) return true;
  return false;
}

Error MethodNotAllowed(http::verb v) {
  return MakeError(Code::kMethodNotAllowed, "method " + std::string(http::to_string(v)) + " not allowed here");
}

}  // namespace

bool Api::Authorized(const HttpContext& ctx) const {
  std::string auth = ctx.Header("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() <= prefix.size() || !beast::iequals(auth.substr(0, prefix.size()), prefix)) return false;
  std::string key = auth.substr(prefix.size());
  bool ok = false;
  for (const auto& k : cfg_.api_keys) ok |= ConstantTimeEquals(k, key);
  return ok;
}

asio::awaitable<void> Api::Handle(HttpContext& ctx) {
  ++metrics_.http_requests;
  auto seg = ctx.segments();
  if (!ctx.query_ok()) {
    co_await ctx.SendError(MakeError(Code::kInvalidRequest, "malformed percent-encoding in URL"));
  } else if (seg.size() == 1 && seg[0] == "healthz") {
    if (ctx.method() != http::verb::get && ctx.method() != http::verb::head)
      co_await ctx.SendError(MethodNotAllowed(ctx.method()));
    else
    {
      nlohmann::json health = {{"status", "ok"}, {"sandboxes_running", mgr_->running_count()}};
      co_await ctx.SendJson(200, health);
    }
  } else if (seg.size() == 1 && seg[0] == "metrics") {
    if (ctx.method() != http::verb::get) co_await ctx.SendError(MethodNotAllowed(ctx.method()));
    else co_await ServeMetrics(ctx);
  } else if (!seg.empty() && seg[0] == "v1") {
    if (!Authorized(ctx))
      co_await ctx.SendError(MakeError(Code::kUnauthorized, "missing or invalid API key (Authorization: Bearer <key>)"));
    else
      co_await RouteV1(ctx, seg);
  } else {
    co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
  }
  if (ctx.status_sent() >= 500) ++metrics_.http_errors_5xx;
  spdlog::info("http method={} path={} status={} request_id={}", std::string(http::to_string(ctx.method())),
               ctx.path(), ctx.status_sent(), ctx.request_id());
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
    // Routes of the contract that this build does not implement yet.
    {
      if (IsLaterRoute(sub)) {
        // Still validate the sandbox id first, so a typo reads as a 404.
        auto rec = mgr_->Get(id);
        if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
        co_return co_await ctx.SendError(
            MakeError(Code::kNotSupported, "'" + sub + "' is not supported by this hutchd yet (see docs/api.md)"));
      }
    }
  }
  if (n >= 2 && (seg[1] == "snapshots" || seg[1] == "templates")) {
    co_return co_await ctx.SendError(
        MakeError(Code::kNotSupported, "'/v1/" + seg[1] + "' is not supported by this hutchd yet (see docs/api.md)"));
  }
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

asio::awaitable<void> Api::ServeMetrics(HttpContext& ctx) {
  std::string out;
  auto line = [&out](const char* name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  line("hutch_sandboxes_running", "gauge", "Sandboxes running or paused.", mgr_->running_count());
  line("hutch_sandboxes_created_total", "counter", "Sandboxes created.", metrics_.sandboxes_created);
  line("hutch_sandbox_create_failures_total", "counter", "Sandbox creates that failed.", metrics_.sandbox_create_failures);
  line("hutch_execs_total", "counter", "Commands started.", metrics_.execs);
  line("hutch_open_streams", "gauge", "Streaming responses in progress.", metrics_.open_streams);
  line("hutch_http_requests_total", "counter", "HTTP requests handled.", metrics_.http_requests);
  line("hutch_http_errors_5xx_total", "counter", "HTTP responses with a 5xx status.", metrics_.http_errors_5xx);
  co_await ctx.SendText(200, "text/plain; version=0.0.4", std::move(out));
}

}  // namespace hutch::api
