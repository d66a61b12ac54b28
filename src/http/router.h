// The front door of hutchd: every request passes here. It counts the
// request, logs its access line, answers 500 when a handler throws, and
// dispatches through a table of routes that the dialects register (the
// router itself knows no dialect: src/server wires them in).
//
// A route is a method and a path pattern: literal segments, "{name}" for
// one segment, and a last "{name*}" for any number of them (the rest of a
// relayed path). Mounts own a path prefix ("/v1", "/e2b"): a guard every
// request under it passes first (authentication, rate limit) and the
// dialect's own 404 / 405 answers. Matchers route requests their path does
// not decide (a Host naming a sandbox port, an E2B envd header).
//
// Dispatch, in order:
//  0. the forwarder, when set (a cluster node relays requests for the
//     sandboxes of other nodes before anything here looks at them);
//  1. raw matchers (relays: their target is the sandbox server's, not
//     checked here);
//  2. a malformed query is refused (400), unless the route is raw;
//  3. the other matchers;
//  4. the guard of the longest mount the path is under (unless the route
//     is open), then its scope check (routed requests only), then the
//     route; a path with routes but not for this method
//     gets the mount's 405, a path without routes its 404 (JSON errors of
//     hutch by default).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "http/api_metrics.h"
#include "http/http_context.h"

namespace hutch::api {

// What a handler is given: the decoded path segments and the pattern's
// named segments ("{id}" → params["id"]; a "{rest*}" holds its segments
// joined with '/').
struct RouteMatch {
  std::vector<std::string> seg;
  std::map<std::string, std::string> params;
  const std::string& operator[](const std::string& name) const { return params.at(name); }
};
using RouteHandler = std::function<asio::awaitable<void>(HttpContext&, const RouteMatch&)>;

// Any method: a route that answers every method itself.
inline constexpr http::verb kAnyMethod = http::verb::unknown;

struct Route {
  http::verb method = kAnyMethod;
  std::string pattern;  // "/v1/sandboxes/{id}/exec"
  RouteHandler handler;
  // The request target is relayed as is: a malformed query is not refused.
  bool raw = false;
  // Not behind the mount's guard (the handler checks credentials itself).
  bool open = false;
  // The route answers not_supported (listed by --print-routes, for the
  // docs test that holds the documentation to it).
  bool not_supported = false;
};

struct Mount {
  std::string prefix;  // "/v1"; "{name}" segments match any one
  // Runs before any request under the prefix is routed: answers it and
  // returns false to stop it there.
  std::function<asio::awaitable<bool>(HttpContext&)> guard;
  // Runs after the guard, only for a request that found its route (and
  // not for routes that answer not_supported whatever they name): the
  // tenant check of what the path names. Running it after routing keeps
  // another tenant's id indistinguishable from a missing one: both get
  // the same 404/405/501 an unknown id gets.
  std::function<asio::awaitable<bool>(HttpContext&)> scope;
  RouteHandler not_found;           // default: 404 "no route for <path>"
  RouteHandler method_not_allowed;  // default: 405 "method X not allowed here"
};

struct Matcher {
  std::string name;  // what it routes, for listings
  std::function<bool(const HttpContext&, const std::vector<std::string>& seg)> applies;
  RouteHandler handler;
  bool raw = false;  // tried before the URL checks
};

// The sandbox a request is about, for the access log ("" if none).
using LogLabel = std::function<std::optional<std::string>(const HttpContext&,
                                                          const std::vector<std::string>& seg)>;

// Tried before anything else (the cluster's node relay): answers the
// request and returns true, or returns false to let it be routed here.
using Forwarder =
    std::function<asio::awaitable<bool>(HttpContext&, const std::vector<std::string>& seg)>;

// 405 for a known path asked with the wrong method.
Error MethodNotAllowed(http::verb v);

class Router {
 public:
  void AddMount(Mount m) { mounts_.push_back(std::move(m)); }
  void Add(Route r);
  void Add(http::verb method, std::string pattern, RouteHandler h) {
    Add(Route{method, std::move(pattern), std::move(h)});
  }
  void AddMatcher(Matcher m) { matchers_.push_back(std::move(m)); }
  // Tried in the order added; the first that names a sandbox wins.
  void AddLogLabel(LogLabel f) { labels_.push_back(std::move(f)); }
  // The sandbox a request is about, by the labels (none: nullopt).
  std::optional<std::string> SandboxOf(const HttpContext& ctx,
                                       const std::vector<std::string>& seg) const;
  void SetForwarder(Forwarder f) { forwarder_ = std::move(f); }

  const std::vector<Route>& routes() const { return routes_; }
  const std::vector<Matcher>& matchers() const { return matchers_; }
  // "GET /v1/sandboxes/{id}" lines, one per route, in registration order
  // ("*" for any method; " not_supported" appended where it applies).
  std::vector<std::string> Describe() const;

  // Handles one request; the response has been sent when it returns.
  asio::awaitable<void> Handle(HttpContext& ctx);
  // A request refused before it could be parsed (HttpServer answers it
  // itself): counted like any other error answer.
  void CountMalformedRequest(int status, Code code);
  ApiMetrics& metrics() { return metrics_; }

 private:
  struct Compiled {
    std::vector<std::string> parts;  // literal, "{name}" or "{name*}"
  };
  asio::awaitable<void> Dispatch(HttpContext& ctx);
  static bool Matches(const Compiled& c, const std::vector<std::string>& seg, RouteMatch* out);
  const Mount* MountOf(const std::vector<std::string>& seg) const;

  std::vector<Route> routes_;
  std::vector<Compiled> compiled_;  // parallel to routes_
  std::vector<Mount> mounts_;
  std::vector<Matcher> matchers_;
  std::vector<LogLabel> labels_;
  Forwarder forwarder_;
  ApiMetrics metrics_;
};

}  // namespace hutch::api
