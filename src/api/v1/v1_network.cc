// /v1/sandboxes/{id}/network: read and replace a sandbox's egress policy.
// GET answers the policy in the shape PUT takes, so a client can read,
// edit and write it back.
#include "api/v1/v1_api.h"

namespace hutch::api {

asio::awaitable<void> V1Api::GetNetwork(HttpContext& ctx, const std::string& id) {
  auto rec = mgr_->Get(id);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(200, rec->network.ToJson());
}

asio::awaitable<void> V1Api::PutNetwork(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto policy = net::ParseNetworkPolicy(*body);
  if (!policy.ok()) co_return co_await ctx.SendError(policy.error());
  auto rec = co_await mgr_->SetNetworkPolicy(id, std::move(policy).value());
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  co_await ctx.SendJson(200, rec->network.ToJson());
}

}  // namespace hutch::api
