#include "http/router.h"

#include <spdlog/spdlog.h>

namespace hutch::api {

namespace {

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

std::vector<std::string> PatternParts(const std::string& pattern) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] == '/') {
      ++i;
      continue;
    }
    size_t j = pattern.find('/', i);
    if (j == std::string::npos) j = pattern.size();
    parts.push_back(pattern.substr(i, j - i));
    i = j;
  }
  return parts;
}

bool IsParam(const std::string& p) { return p.size() >= 2 && p.front() == '{' && p.back() == '}'; }
bool IsRest(const std::string& p) { return IsParam(p) && p[p.size() - 2] == '*'; }

asio::awaitable<void> NotFound(HttpContext& ctx, const RouteMatch&) {
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

asio::awaitable<void> WrongMethod(HttpContext& ctx, const RouteMatch&) {
  co_await ctx.SendError(MethodNotAllowed(ctx.method()));
}

}  // namespace

Error MethodNotAllowed(http::verb v) {
  return MakeError(Code::kMethodNotAllowed,
                   "method " + std::string(http::to_string(v)) + " not allowed here");
}

void Router::Add(Route r) {
  compiled_.push_back(Compiled{PatternParts(r.pattern)});
  routes_.push_back(std::move(r));
}

std::vector<std::string> Router::Describe() const {
  std::vector<std::string> out;
  for (const auto& r : routes_) {
    std::string m = r.method == kAnyMethod ? "*" : std::string(http::to_string(r.method));
    out.push_back(m + " " + r.pattern + (r.not_supported ? " not_supported" : ""));
  }
  return out;
}

bool Router::Matches(const Compiled& c, const std::vector<std::string>& seg, RouteMatch* out) {
  const auto& parts = c.parts;
  const bool rest = !parts.empty() && IsRest(parts.back());
  const size_t fixed = rest ? parts.size() - 1 : parts.size();
  if (rest ? seg.size() < fixed : seg.size() != fixed) return false;
  for (size_t i = 0; i < fixed; ++i)
    if (!IsParam(parts[i]) && parts[i] != seg[i]) return false;
  if (out) {
    out->seg = seg;
    out->params.clear();
    for (size_t i = 0; i < fixed; ++i)
      if (IsParam(parts[i])) out->params[parts[i].substr(1, parts[i].size() - 2)] = seg[i];
    if (rest) {
      std::string joined;
      for (size_t i = fixed; i < seg.size(); ++i) joined += (i > fixed ? "/" : "") + seg[i];
      out->params[parts.back().substr(1, parts.back().size() - 3)] = joined;
    }
  }
  return true;
}

const Mount* Router::MountOf(const std::vector<std::string>& seg) const {
  const Mount* best = nullptr;
  size_t best_len = 0;
  for (const auto& m : mounts_) {
    auto parts = PatternParts(m.prefix);
    if (parts.size() > seg.size() || (best && parts.size() <= best_len)) continue;
    bool under = true;
    for (size_t i = 0; i < parts.size() && under; ++i)
      under = IsParam(parts[i]) || parts[i] == seg[i];
    if (under) {
      best = &m;
      best_len = parts.size();
    }
  }
  return best;
}

asio::awaitable<void> Router::Handle(HttpContext& ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  ctx.set_error_observer([this](const Error& e) { metrics_.CountError(e.code); });
  bool threw = false;
  try {
    co_await Dispatch(ctx);
  } catch (const std::exception& e) {
    // A bug, not a client error: logged with the request id, answered 500.
    spdlog::error("handler_exception path={} request_id={} what=\"{}\"", LogSafe(ctx.path()),
                  ctx.request_id(), e.what());
    threw = true;
  }
  if (threw) {
    if (ctx.responded()) ctx.CloseAfterResponse();  // a response broke off half-way
    else co_await ctx.SendError(MakeError(Code::kInternal, "internal error"));
  }
  std::string method =
      ctx.method() == http::verb::unknown ? "other" : std::string(http::to_string(ctx.method()));
  metrics_.CountRequest(method, ctx.status_sent());
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  const auto seg = ctx.segments();
  std::string sandbox;
  if (auto id = SandboxOf(ctx, seg)) sandbox = " sandbox=" + LogSafe(*id);
  spdlog::info("http method={} path={} status={} request_id={}{} duration_ms={}", method,
               LogSafe(ctx.path()), ctx.status_sent(), ctx.request_id(), sandbox, ms);
}

void Router::CountMalformedRequest(int status, Code code) {
  metrics_.CountRequest("other", status);
  metrics_.CountError(code);
}

std::optional<std::string> Router::SandboxOf(const HttpContext& ctx,
                                             const std::vector<std::string>& seg) const {
  for (const auto& label : labels_)
    if (auto id = label(ctx, seg)) return id;
  return std::nullopt;
}

asio::awaitable<void> Router::Dispatch(HttpContext& ctx) {
  const auto seg = ctx.segments();
  if (forwarder_) {
    const bool forwarded = co_await forwarder_(ctx, seg);
    if (forwarded) co_return;
  }
  RouteMatch match;
  for (const auto& m : matchers_)
    if (m.raw && m.applies(ctx, seg)) co_return co_await m.handler(ctx, match);

  // The route for this path and method: one for the method itself first,
  // else one for any method; `known`: the path has routes at all.
  const Route* route = nullptr;
  bool known = false;
  for (int pass = 0; pass < 2 && !route; ++pass) {
    for (size_t i = 0; i < routes_.size(); ++i) {
      const Route& r = routes_[i];
      if (!Matches(compiled_[i], seg, nullptr)) continue;
      known = true;
      if (pass == 0 ? r.method == ctx.method() : r.method == kAnyMethod) {
        route = &r;
        Matches(compiled_[i], seg, &match);
        break;
      }
    }
  }
  match.seg = seg;
  // A relayed target's query (and path after the port) is the sandbox
  // server's business, not checked here.
  if (!ctx.query_ok() && !(route && route->raw))
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest, "malformed percent-encoding in URL"));
  for (const auto& m : matchers_)
    if (!m.raw && m.applies(ctx, seg)) co_return co_await m.handler(ctx, match);

  const Mount* mount = MountOf(seg);
  // Authentication comes first: a request without a valid key is refused
  // before it can learn which paths exist or spend the tokens of a real key.
  if (mount && mount->guard && !(route && route->open)) {
    const bool pass = co_await mount->guard(ctx);
    if (!pass) co_return;
  }
  if (route && mount && mount->scope && !route->open && !route->not_supported) {
    const bool pass = co_await mount->scope(ctx);
    if (!pass) co_return;
  }
  if (route) co_return co_await route->handler(ctx, match);
  if (known) {
    if (mount && mount->method_not_allowed)
      co_return co_await mount->method_not_allowed(ctx, match);
    co_return co_await WrongMethod(ctx, match);
  }
  if (mount && mount->not_found) co_return co_await mount->not_found(ctx, match);
  co_await NotFound(ctx, match);
}

}  // namespace hutch::api
