// The /v1 route table: every route of docs/api.md and the handler it
// reaches. The mount's guard authenticates first (a request without a
// valid key is refused before it can spend the tokens of a real key),
// then charges the key's rate limit.
#include "api/common/bearer_admit.h"
#include "api/v1/v1_api.h"

namespace hutch::api {

asio::awaitable<bool> V1Api::Admit(HttpContext& ctx) {
  // A browser's terminal WebSocket: a ticket in place of the key
  // (auth/pty_tickets.h). A request with a key is judged by its key.
  const auto ticket = ctx.Query("ticket");
  const auto seg = ticket ? ctx.segments() : std::vector<std::string>{};
  if (ticket && ctx.Header("Authorization").empty() && ctx.method() == http::verb::get &&
      seg.size() == 4 && seg[0] == "v1" && seg[1] == "sandboxes" && seg[3] == "pty") {
    auto key_hash = pty_tickets_.Redeem(*ticket, seg[2], auth::PtyTickets::Clock::now());
    auth::Principal who = key_hash ? creds_->MatchKeyHash(*key_hash) : auth::Principal{};
    const std::string refused =
        "invalid, expired or already used terminal ticket (POST "
        "/v1/sandboxes/{id}/pty/ticket issues one)";
    co_return co_await AdmitPrincipal(ctx, *creds_, std::move(who), refused);
  }
  co_return co_await AdmitBearer(ctx, *creds_);
}

asio::awaitable<bool> V1Api::Scope(HttpContext& ctx) {
  if (mgr_ == nullptr) co_return true;
  if (auto st = CheckScope(*mgr_, ctx.principal(), ScopedTargetOf(ctx)); !st.ok()) {
    co_await ctx.SendError(st.error());
    co_return false;
  }
  co_return true;
}

// The resource a /v1 path names, for the tenant check (tenant_scope.h).
ScopedTarget V1Api::ScopedTargetOf(const HttpContext& ctx) {
  const auto& seg = ctx.segments();
  if (seg.size() < 2 || seg[0] != "v1") return {};
  const std::string& kind = seg[1];
  if (kind == "template-aliases")
    return ctx.method() == http::verb::get ? ScopedTarget{} : ScopedTarget{ScopedKind::kAdminOnly};
  if (seg.size() < 3) return {};
  if (kind == "sandboxes") return {ScopedKind::kSandbox, seg[2]};
  if (kind == "snapshots") return {ScopedKind::kSnapshot, seg[2]};
  if (kind == "volumes") return {ScopedKind::kVolume, seg[2]};
  if (kind == "templates")
    return {
        ctx.method() == http::verb::get ? ScopedKind::kTemplateRead : ScopedKind::kTemplateWrite,
        seg[2]};
  return {};
}

void V1Api::Register(Router& r) {
  using V = http::verb;
  Mount mount;
  mount.prefix = "/v1";
  mount.guard = [this](HttpContext& ctx) { return Admit(ctx); };
  mount.scope = [this](HttpContext& ctx) { return Scope(ctx); };
  r.AddMount(std::move(mount));
  r.AddLogLabel(
      [](const HttpContext&, const std::vector<std::string>& seg) -> std::optional<std::string> {
        if (seg.size() >= 3 && seg[0] == "v1" && seg[1] == "sandboxes") return seg[2];
        return std::nullopt;
      });
  // (Named handlers: each route's lambda only picks its arguments.)
  auto add = [&](V m, const char* pattern, RouteHandler h) { r.Add(m, pattern, std::move(h)); };
  add(V::post, "/v1/sandboxes",
      [this](HttpContext& c, const RouteMatch&) { return CreateSandbox(c); });
  add(V::get, "/v1/sandboxes",
      [this](HttpContext& c, const RouteMatch&) { return ListSandboxes(c); });
  add(V::get, "/v1/sandboxes/{id}",
      [this](HttpContext& c, const RouteMatch& m) { return GetSandbox(c, m["id"]); });
  add(V::delete_, "/v1/sandboxes/{id}",
      [this](HttpContext& c, const RouteMatch& m) { return DeleteSandbox(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/exec",
      [this](HttpContext& c, const RouteMatch& m) { return Exec(c, m["id"], false); });
  add(V::post, "/v1/sandboxes/{id}/exec/stream",
      [this](HttpContext& c, const RouteMatch& m) { return Exec(c, m["id"], true); });
  add(V::post, "/v1/sandboxes/{id}/ttl",
      [this](HttpContext& c, const RouteMatch& m) { return SetTtl(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/snapshots",
      [this](HttpContext& c, const RouteMatch& m) { return CreateSnapshot(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/fork",
      [this](HttpContext& c, const RouteMatch& m) { return ForkSandbox(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/pause",
      [this](HttpContext& c, const RouteMatch& m) { return PauseResume(c, m["id"], true); });
  add(V::post, "/v1/sandboxes/{id}/resume",
      [this](HttpContext& c, const RouteMatch& m) { return PauseResume(c, m["id"], false); });
  add(V::get, "/v1/sandboxes/{id}/metrics",
      [this](HttpContext& c, const RouteMatch& m) { return SandboxMetrics(c, m["id"]); });
  add(V::get, "/v1/sandboxes/{id}/events",
      [this](HttpContext& c, const RouteMatch& m) { return SandboxEvents(c, m["id"]); });
  add(V::get, "/v1/sandboxes/{id}/fs",
      [this](HttpContext& c, const RouteMatch& m) { return FileGet(c, m["id"]); });
  add(V::put, "/v1/sandboxes/{id}/fs",
      [this](HttpContext& c, const RouteMatch& m) { return FilePut(c, m["id"]); });
  add(V::delete_, "/v1/sandboxes/{id}/fs",
      [this](HttpContext& c, const RouteMatch& m) { return FileDelete(c, m["id"]); });
  add(V::get, "/v1/sandboxes/{id}/fs/list",
      [this](HttpContext& c, const RouteMatch& m) { return FileList(c, m["id"], false); });
  add(V::get, "/v1/sandboxes/{id}/fs/stat",
      [this](HttpContext& c, const RouteMatch& m) { return FileList(c, m["id"], true); });
  add(V::post, "/v1/sandboxes/{id}/fs/mkdir",
      [this](HttpContext& c, const RouteMatch& m) { return FileMkdir(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/fs/move",
      [this](HttpContext& c, const RouteMatch& m) { return FileMove(c, m["id"]); });
  auto processes = [this](HttpContext& c, const RouteMatch& m) {
    return Processes(c, m["id"], m.seg);
  };
  add(V::post, "/v1/sandboxes/{id}/processes", processes);
  add(V::get, "/v1/sandboxes/{id}/processes", processes);
  add(V::get, "/v1/sandboxes/{id}/processes/{pid}", processes);
  add(V::get, "/v1/sandboxes/{id}/processes/{pid}/stream", processes);
  add(V::post, "/v1/sandboxes/{id}/processes/{pid}/stdin", processes);
  add(V::post, "/v1/sandboxes/{id}/processes/{pid}/signal", processes);
  add(V::get, "/v1/sandboxes/{id}/pty",
      [this](HttpContext& c, const RouteMatch& m) { return Pty(c, m["id"]); });
  add(V::post, "/v1/sandboxes/{id}/pty/ticket",
      [this](HttpContext& c, const RouteMatch& m) { return PtyTicket(c, m["id"]); });
  // The sandbox server's target is relayed as is (raw); without a port
  // the answer is 400.
  for (const char* pattern :
       {"/v1/sandboxes/{id}/ports/{port}/{path*}", "/v1/sandboxes/{id}/ports"}) {
    Route ports{kAnyMethod, pattern,
                [this](HttpContext& c, const RouteMatch& m) { return Ports(c, m["id"], m.seg); }};
    ports.raw = true;
    r.Add(std::move(ports));
  }
  add(V::post, "/v1/sandboxes/{id}/code",
      [this](HttpContext& c, const RouteMatch& m) { return RunCode(c, m["id"]); });
  auto contexts = [this](HttpContext& c, const RouteMatch& m) {
    const bool one = m.params.count("ctx") > 0;
    const std::string& last = m.seg.back();
    return CodeContexts(c, m["id"], one ? m["ctx"] : "", one && last != m["ctx"] ? last : "");
  };
  add(V::get, "/v1/sandboxes/{id}/code/contexts", contexts);
  add(V::post, "/v1/sandboxes/{id}/code/contexts", contexts);
  add(V::delete_, "/v1/sandboxes/{id}/code/contexts/{ctx}", contexts);
  add(V::post, "/v1/sandboxes/{id}/code/contexts/{ctx}/restart", contexts);
  add(V::post, "/v1/sandboxes/{id}/code/contexts/{ctx}/interrupt", contexts);
  add(V::get, "/v1/sandboxes/{id}/network",
      [this](HttpContext& c, const RouteMatch& m) { return GetNetwork(c, m["id"]); });
  add(V::put, "/v1/sandboxes/{id}/network",
      [this](HttpContext& c, const RouteMatch& m) { return PutNetwork(c, m["id"]); });
  auto vault = [this](HttpContext& c, const RouteMatch& m) {
    // /v1/sandboxes/{id}/vault[/{kind}/{name}]
    return RouteVault(c, m["id"], m.seg.size() > 4 ? m.seg[4] : "",
                      m.seg.size() > 5 ? m.seg[5] : "");
  };
  add(V::get, "/v1/sandboxes/{id}/vault", vault);
  add(V::put, "/v1/sandboxes/{id}/vault", vault);
  add(V::put, "/v1/sandboxes/{id}/vault/credentials/{name}", vault);
  add(V::delete_, "/v1/sandboxes/{id}/vault/credentials/{name}", vault);
  add(V::put, "/v1/sandboxes/{id}/vault/bindings/{name}", vault);
  add(V::delete_, "/v1/sandboxes/{id}/vault/bindings/{name}", vault);

  auto snapshots = [this](HttpContext& c, const RouteMatch& m) { return RouteSnapshots(c, m.seg); };
  add(V::get, "/v1/snapshots", snapshots);
  add(V::get, "/v1/snapshots/{id}", snapshots);
  add(V::delete_, "/v1/snapshots/{id}", snapshots);

  auto volumes = [this](HttpContext& c, const RouteMatch& m) { return RouteVolumes(c, m.seg); };
  add(V::post, "/v1/volumes", volumes);
  add(V::get, "/v1/volumes", volumes);
  add(V::get, "/v1/volumes/{name}", volumes);
  add(V::delete_, "/v1/volumes/{name}", volumes);
  add(V::get, "/v1/volumes/{name}/fs", volumes);
  add(V::put, "/v1/volumes/{name}/fs", volumes);
  add(V::delete_, "/v1/volumes/{name}/fs", volumes);
  add(V::get, "/v1/volumes/{name}/fs/list", volumes);
  add(V::get, "/v1/volumes/{name}/fs/stat", volumes);
  add(V::post, "/v1/volumes/{name}/fs/mkdir", volumes);
  add(V::post, "/v1/volumes/{name}/fs/move", volumes);

  auto templates = [this](HttpContext& c, const RouteMatch& m) { return RouteTemplates(c, m.seg); };
  add(V::post, "/v1/templates", templates);
  add(V::get, "/v1/templates", templates);
  add(V::get, "/v1/templates/{name}", templates);
  add(V::delete_, "/v1/templates/{name}", templates);
  auto aliases = [this](HttpContext& c, const RouteMatch& m) {
    return RouteTemplateAliases(c, m.seg);
  };
  add(V::get, "/v1/template-aliases", aliases);
  add(V::put, "/v1/template-aliases/{alias}", aliases);
  add(V::delete_, "/v1/template-aliases/{alias}", aliases);
}

}  // namespace hutch::api
