#include "server/console_ui.h"

namespace hutch::api {

const char kConsoleCsp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "style-src-elem 'self' 'unsafe-inline'; style-src-attr 'none'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

std::string DefaultConsoleDir(const std::string& exe_dir) { return exe_dir + "/ui"; }

namespace {

void ConsoleHeaders(HttpContext& ctx) {
  ctx.AddHeader("Content-Security-Policy", kConsoleCsp);
  ctx.AddHeader("X-Frame-Options", "DENY");
  ctx.AddHeader("Referrer-Policy", "no-referrer");
  ctx.AddHeader("Cross-Origin-Opener-Policy", "same-origin");
}

}  // namespace

void RegisterConsole(Router& r, std::shared_ptr<const StaticFiles> files, std::string dir) {
  using V = http::verb;
  r.Add(V::get, "/ui/{path*}",
        [files, dir](HttpContext& ctx, const RouteMatch& m) -> asio::awaitable<void> {
          // (The pattern matches "/ui" too: relative to it, the page's
          // links would miss the folder.)
          if (ctx.path() == "/ui") {
            ctx.AddHeader("Location", "/ui/");
            co_return co_await ctx.SendEmpty(308);
          }
          ConsoleHeaders(ctx);
          if (files == nullptr || files->count() == 0)
            co_return co_await ctx.SendError(MakeError(
                Code::kNotFound, "the web console is not built: no assets in " + dir +
                                     " (scripts/setup builds it; --ui-dir names another)"));
          const std::string& rel = m["path"];
          const StaticFiles::File* f = files->Find(rel.empty() ? "index.html" : rel);
          if (f == nullptr)
            co_return co_await ctx.SendError(
                MakeError(Code::kNotFound, "no console asset " + ctx.path()));
          co_await SendStaticFile(ctx, *f);
        });
}

}  // namespace hutch::api
