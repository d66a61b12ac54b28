#include "api/common/bearer_admit.h"

namespace hutch::api {

asio::awaitable<bool> AdmitBearer(HttpContext& ctx, auth::Credentials& creds, bool challenge) {
  const std::string refused = "missing or invalid API key (Authorization: Bearer <key>)";
  co_return co_await AdmitPrincipal(ctx, creds, creds.MatchBearer(ctx.Header("Authorization")),
                                    refused, challenge);
}

asio::awaitable<bool> AdmitPrincipal(HttpContext& ctx, auth::Credentials& creds,
                                     auth::Principal who, const std::string& refused,
                                     bool challenge) {
  if (who.empty()) {
    if (challenge) ctx.AddHeader("WWW-Authenticate", "Bearer");
    co_await ctx.SendError(MakeError(Code::kUnauthorized, refused));
    co_return false;
  }
  ctx.MarkAuthenticated();
  // (Buckets are keyed by the owner id, so the other dialects, which know
  // a sandbox's owner only by that id, spend the same tokens.)
  if (int wait = creds.Charge(who.owner); wait > 0) {
    ctx.AddHeader("Retry-After", std::to_string(wait));
    co_await ctx.SendError(MakeError(
        Code::kRateLimited,
        "rate limit of this API key exceeded; retry after " + std::to_string(wait) + " s"));
    co_return false;
  }
  ctx.set_principal(std::move(who));
  co_return true;
}

}  // namespace hutch::api
