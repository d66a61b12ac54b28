// E2B fork (`POST /sandboxes/{id}/fork {timeout?, count?}`) onto hutch's
// fork: `count` new sandboxes from the current files of a running or
// paused one (copy-on-write layers; jail children start fresh processes,
// vm children continue the machine). E2B answers one result per child,
// each a sandbox or an error; hutch's fork makes all or none, so the
// answer is either every child or the one error of the whole request.
#include "api/common/json_fields.h"
#include "api/e2b/e2b_api.h"

namespace hutch::api::e2b {

asio::awaitable<void> E2bApi::Fork(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  auto timeout = TimeoutField(*body);
  if (!timeout.ok()) co_return co_await SendControlError(ctx, timeout.error());
  // E2B's bounds on count (the SDK checks them too).
  auto count = OptInt(*body, "count", 1, 20);
  if (!count.ok()) co_return co_await SendControlError(ctx, count.error());
  // An unknown, killed or failed sandbox is not found, as in E2B.
  if (auto rec = Visible(mgr_, id); !rec.ok())
    co_return co_await SendControlError(ctx, rec.error());
  auto kids = co_await mgr_->Fork(id, static_cast<int>(count->value_or(1)), ctx.principal().owner,
                                  !ctx.principal().admin());
  if (!kids.ok()) co_return co_await SendControlError(ctx, kids.error());
  Json out = Json::array();
  for (auto& kid : *kids) {
    // E2B's forks live `timeout` seconds (its default, 300, when absent).
    auto rec = mgr_->SetTtl(kid.id, timeout->value_or(300));
    if (!rec.ok()) {
      const int status = CodeHttpStatus(rec.error().code);
      out.push_back({{"error", {{"code", status}, {"message", rec.error().message}}}});
      continue;
    }
    out.push_back({{"sandbox", SandboxJson(*rec, false)}});
  }
  co_await ctx.SendJson(201, out);
}

}  // namespace hutch::api::e2b
