// /v1 snapshots and fork: capture a sandbox's files, list and delete
// snapshots, fork a live sandbox into N copy-on-write children.
#include "api/common/json_fields.h"
#include "api/v1/v1_api.h"

namespace hutch::api {

asio::awaitable<void> V1Api::CreateSnapshot(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadBody(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto snap = co_await mgr_->Snapshot(id, !ctx.principal().admin());
  if (!snap.ok()) co_return co_await ctx.SendError(snap.error());
  nlohmann::json out = snap->ToJson();
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> V1Api::ForkSandbox(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadBody(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  int64_t count = 1;
  if (!body->empty()) {
    auto j = nlohmann::json::parse(*body, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      co_return co_await ctx.SendError(
          MakeError(Code::kInvalidRequest, "body must be a JSON object"));
    if (auto st = RejectUnknownFields(j, {"count"}); !st.ok())
      co_return co_await ctx.SendError(st.error());
    HUTCH_FIELD(n, OptInt(j, "count", 1, 1000));
    if (*n) count = **n;
  }
  auto kids = co_await mgr_->Fork(id, static_cast<int>(count), ctx.principal().owner,
                                  !ctx.principal().admin());
  if (!kids.ok()) co_return co_await ctx.SendError(kids.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : *kids) list.push_back(SandboxOut(r));
  // vm children continue the running machine (memory and processes); jail
  // children start from a file snapshot.
  const bool memory = !kids->empty() && kids->front().boot == "fork";
  nlohmann::json out = {{"sandboxes", list}, {"memory", memory}};
  co_await ctx.SendJson(201, out);
}

asio::awaitable<void> V1Api::RouteSnapshots(HttpContext& ctx, const std::vector<std::string>& seg) {
  using V = http::verb;
  const V m = ctx.method();
  if (seg.size() == 2) {
    if (m != V::get)
      co_return co_await ctx.SendError(
          MakeError(Code::kMethodNotAllowed,
                    "method " + std::string(http::to_string(m)) + " not allowed here"));
    nlohmann::json items = nlohmann::json::array();
    for (const auto& s : mgr_->ListSnapshots())
      if (ctx.principal().Owns(s.owner)) items.push_back(s.ToJson());
    nlohmann::json out = {{"items", items}};
    co_return co_await ctx.SendJson(200, out);
  }
  if (seg.size() == 3) {
    if (m == V::get) {
      auto s = mgr_->GetSnapshot(seg[2]);
      if (!s.ok()) co_return co_await ctx.SendError(s.error());
      nlohmann::json out = s->ToJson();
      co_return co_await ctx.SendJson(200, out);
    }
    if (m == V::delete_) {
      auto st = mgr_->DeleteSnapshot(seg[2]);
      if (!st.ok()) co_return co_await ctx.SendError(st.error());
      co_return co_await ctx.SendEmpty(204);
    }
    co_return co_await ctx.SendError(
        MakeError(Code::kMethodNotAllowed,
                  "method " + std::string(http::to_string(m)) + " not allowed here"));
  }
  co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
}

}  // namespace hutch::api
