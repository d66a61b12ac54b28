// The egress sidecar (port 18080 through the server proxy), answered by
// hutchd: GET /policy reads the sandbox's hutch network policy in
// OpenSandbox's shape, PATCH /policy merges rules into it and DELETE
// /policy removes rules by target; both apply through
// SandboxManager::SetNetworkPolicy, so new connections follow at once.
// /credential-vault... is the sandbox's vault (osb_vault.cc).
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/opensandbox/network_policy.h"
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

using V = http::verb;

// Holds a sandbox's place in OpenSandboxApi's set of sandboxes whose
// policy is being changed.
struct EgressSlot {
  std::set<std::string>& set;
  std::string id;
  ~EgressSlot() { set.erase(id); }
};

}  // namespace

asio::awaitable<void> OpenSandboxApi::Egress(HttpContext& ctx, const SandboxRecord& rec,
                                             const std::vector<std::string>& s) {
  const V m = ctx.method();
  const bool policy = s.size() == 1 && s[0] == "policy";
  if (policy && m == V::get) co_return co_await ctx.SendJson(200, EgressPolicyOf(rec));
  if (policy && (m == V::patch || m == V::delete_)) {
    // The bodies are arrays (rules, targets): ReadJson takes objects only.
    auto text = co_await ctx.ReadBody(json_limit_);
    if (!text.ok()) co_return co_await SendError(ctx, text.error());
    const Json body = Json::parse(*text, nullptr, false);
    if (body.is_discarded()) {
      Error e = MakeError(Code::kInvalidRequest, "malformed JSON body");
      co_return co_await SendError(ctx, e);
    }
    // A change reads the current policy, merges and applies it across a
    // co_await (nft runs): two changes at once would each start from the
    // same policy and the second would undo the first. So they take turns
    // per sandbox (one thread runs every handler: a set is enough to
    // queue on).
    asio::steady_timer wait(co_await asio::this_coro::executor);
    for (int i = 0; egress_changing_.count(rec.id); ++i) {
      if (i == 2000) {
        Error e = MakeError(Code::kConflict,
                            "sandbox " + rec.id + ": another egress policy change did not finish");
        co_return co_await SendError(ctx, e);
      }
      wait.expires_after(std::chrono::milliseconds(5));
      boost::system::error_code ec;
      co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    egress_changing_.insert(rec.id);
    EgressSlot slot{egress_changing_, rec.id};
    auto cur = mgr_->Get(rec.id);
    if (!cur.ok()) co_return co_await SendError(ctx, cur.error());
    auto next = m == V::patch ? PatchEgressRules(cur->network, body)
                              : DeleteEgressRules(cur->network, body);
    if (!next.ok()) co_return co_await SendError(ctx, next.error());
    auto updated = co_await mgr_->SetNetworkPolicy(rec.id, std::move(next).value());
    if (!updated.ok()) co_return co_await SendError(ctx, updated.error());
    co_return co_await ctx.SendJson(200, EgressPolicyOf(*updated));
  }
  if (!s.empty() && s[0] == "credential-vault") {
    const std::vector<std::string> rest(s.begin() + 1, s.end());
    co_return co_await CredentialVault(ctx, rec.id, rest);
  }
  Error e = MakeError(Code::kNotFound,
                      "no egress route " + std::string(http::to_string(m)) + " " + ctx.path());
  co_await SendError(ctx, e);
}

}  // namespace hutch::api::opensandbox
