// /v1 templates: build one from a spec (progress as SSE), list, get and
// remove built templates; /v1/template-aliases: the alias table.
#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"
#include "core/template_spec.h"

namespace hutch::api {

namespace {

// Specs carry their files inline; a few MB of them is plenty.
constexpr size_t kSpecLimit = 32 << 20;

// A tenant key lists the shared templates and its own (tenant_scope.h).
nlohmann::json TemplateListJson(SandboxManager* mgr, const auth::Principal& who) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& r : mgr->templates()->List())
    if (r.owner.empty() || who.Owns(r.owner)) items.push_back(r.ToJson());
  return nlohmann::json{{"items", items}, {"aliases", mgr->templates()->Aliases()}};
}

}  // namespace

asio::awaitable<void> V1Api::BuildTemplate(HttpContext& ctx) {
  TemplateBuilder* builder = mgr_->template_builder();
  if (!builder)
    co_return co_await ctx.SendError(
        MakeError(Code::kNotSupported, "this hutchd does not build templates"));
  auto body = co_await ctx.ReadBody(kSpecLimit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  // The body is the spec itself, TOML or JSON (docs/templates.md).
  auto spec = ParseTemplateText(*body);
  if (!spec.ok()) co_return co_await ctx.SendError(spec.error().Context("template spec"));
  if (auto n = ctx.Query("name"); n && !n->empty()) {
    if (!ValidTemplateName(*n))
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "'name' is not a template name"));
    spec->name = *n;
  }
  if (const auth::Principal& who = ctx.principal(); !who.admin()) {
    // Names are server-wide: a tenant may build a new name or rebuild its
    // own, never replace (or shadow, as an alias) what others use; and it
    // builds on shared templates or its own.
    spec->owner = who.owner;
    if (auto taken = mgr_->templates()->Resolve(spec->name);
        taken.ok() && taken->owner != who.owner)
      co_return co_await ctx.SendError(MakeError(
          Code::kConflict, "template name '" + spec->name + "' is taken; choose another"));
    if (!spec->FromDebian()) {
      auto parent = mgr_->templates()->Resolve(spec->from);
      if (parent.ok() && !parent->owner.empty() && parent->owner != who.owner)
        co_return co_await ctx.SendError(
            MakeError(Code::kTemplateNotFound, "template '" + spec->from + "' not found"));
    }
  }
  if (builder->building(spec->name))
    co_return co_await ctx.SendError(
        MakeError(Code::kConflict, "template '" + spec->name + "' is being built already"));
  // Refused here as a plain 403 before any stream starts; Build checks
  // again as it registers the build (another may have started meanwhile).
  const TenantQuotas* quota = ctx.principal().admin() ? nullptr : &mgr_->options().quotas;
  if (quota) {
    if (auto st = builder->CheckQuota(*spec, *quota); !st.ok())
      co_return co_await ctx.SendError(st.error());
  }

  // Progress as SSE unless the client asked for one JSON answer at the end.
  const bool sse = ctx.Header("Accept").find("text/event-stream") != std::string::npos;
  bool client_gone = false;
  if (sse) {
    if (auto st = co_await ctx.BeginSse(); !st.ok()) co_return;
  }
  // The build goes on if the client leaves: it ends registered or not at
  // all, and GET /v1/templates/{name} tells which.
  TemplateBuildSink sink = [&](const std::string& event,
                               const nlohmann::json& data) -> asio::awaitable<void> {
    if (!sse || client_gone) co_return;
    std::string chunk =
        event == "ping" ? std::string(": ping\n\n") : SseJsonEvent(event.c_str(), data);
    if (auto st = co_await ctx.WriteChunk(chunk); !st.ok()) client_gone = true;
  };
  auto rec = co_await builder->Build(std::move(*spec), sink, quota);
  if (sse) {
    if (!rec.ok()) ctx.NoteError(rec.error());  // told in-band, as the "error" event
    if (!client_gone) (void)co_await ctx.EndStream();
    else ctx.CloseAfterResponse();
    co_return;
  }
  if (!rec.ok()) {
    const Error& e = rec.error();
    const TemplateBuildFailure& f = builder->last_failure();
    nlohmann::json out = {
        {"code", CodeName(e.code)}, {"message", e.message}, {"request_id", ctx.request_id()},
        {"step", f.step},           {"name", f.name},       {"exit_code", f.exit_code},
        {"log_tail", f.log_tail}};
    ctx.NoteError(e);
    co_return co_await ctx.SendJson(CodeHttpStatus(e.code), out);
  }
  nlohmann::json out = rec->ToJson();
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> V1Api::RouteTemplates(HttpContext& ctx, const std::vector<std::string>& seg) {
  using V = http::verb;
  const V m = ctx.method();
  TemplateRegistry* reg = mgr_->templates();
  if (seg.size() == 2) {
    if (m == V::post) co_return co_await BuildTemplate(ctx);
    if (m != V::get) co_return co_await ctx.SendError(MethodNotAllowed(m));
    nlohmann::json out = TemplateListJson(mgr_, ctx.principal());
    co_return co_await ctx.SendJson(200, out);
  }
  if (seg.size() == 3) {
    const std::string& name = seg[2];
    if (m == V::get) {
      // An alias reads as the template it names.
      std::string own = name;
      if (!reg->Exists(own)) {
        auto aliases = reg->Aliases();
        if (auto a = aliases.find(name); a != aliases.end()) own = a->second;
      }
      auto r = reg->Get(own);
      if (!r.ok()) co_return co_await ctx.SendError(r.error());
      nlohmann::json out = r->ToJson();
      if (own != name) out["alias"] = name;
      co_return co_await ctx.SendJson(200, out);
    }
    if (m == V::delete_) {
      if (auto st = mgr_->DeleteTemplate(name); !st.ok())
        co_return co_await ctx.SendError(st.error());
      co_return co_await ctx.SendEmpty(204);
    }
    co_return co_await ctx.SendError(MethodNotAllowed(m));
  }
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

asio::awaitable<void> V1Api::RouteTemplateAliases(HttpContext& ctx,
                                                  const std::vector<std::string>& seg) {
  using V = http::verb;
  const V m = ctx.method();
  TemplateRegistry* reg = mgr_->templates();
  if (seg.size() == 2) {
    if (m != V::get) co_return co_await ctx.SendError(MethodNotAllowed(m));
    nlohmann::json out = {{"aliases", reg->Aliases()}};
    co_return co_await ctx.SendJson(200, out);
  }
  if (seg.size() == 3) {
    const std::string& name = seg[2];
    if (m == V::put) {
      auto j = co_await ctx.ReadJson(cfg_.json_body_limit);
      if (!j.ok()) co_return co_await ctx.SendError(j.error());
      if (auto st = RejectUnknownFields(*j, {"template"}); !st.ok())
        co_return co_await ctx.SendError(st.error());
      HUTCH_FIELD(target, OptString(*j, "template"));
      if (!*target)
        co_return co_await ctx.SendError(
            MakeError(Code::kInvalidRequest, "'template' is required"));
      if (auto st = reg->SetAlias(name, **target); !st.ok())
        co_return co_await ctx.SendError(st.error());
      nlohmann::json out = {{"alias", name}, {"template", **target}};
      co_return co_await ctx.SendJson(200, out);
    }
    if (m == V::delete_) {
      if (auto st = reg->RemoveAlias(name); !st.ok()) co_return co_await ctx.SendError(st.error());
      co_return co_await ctx.SendEmpty(204);
    }
    co_return co_await ctx.SendError(MethodNotAllowed(m));
  }
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

}  // namespace hutch::api
