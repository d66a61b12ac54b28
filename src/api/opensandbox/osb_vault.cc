// OpenSandbox's Credential Vault routes, answered by hutchd onto the
// sandbox's VaultBook (the egress proxy injects; core/vault.h): the egress
// sidecar's /credential-vault... through the server proxy (18080) and the
// lifecycle's server-routed /sandboxes/{id}/credential-vault... Both take
// the same bodies and answer the same states (credential_vault.h). Reads
// show names and bindings, never a value; a body that does not parse is
// refused without quoting it, since it may hold a secret.
#include "api/opensandbox/credential_vault.h"
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

using V = http::verb;

Error NoVault(const std::string& id, const std::string& what) {
  return MakeError(Code::kNotFound, "sandbox " + id + " has no " + what);
}

// A GET: the state, one of its lists, or one credential's or binding's
// metadata (`s`: the path after credential-vault).
Result<Json> ReadVault(const vault::Vault* cur, const std::string& id,
                       const std::vector<std::string>& s) {
  if (!cur) return NoVault(id, "credential vault");
  Json state = VaultStateJson(*cur);
  if (s.empty()) return state;
  if (s.size() == 1) return Json{{"revision", state["revision"]}, {s[0], state[s[0]]}};
  auto one = s[0] == "credentials" ? CredentialMetadata(*cur, s[1]) : BindingMetadata(*cur, s[1]);
  if (!one) return NoVault(id, s[0].substr(0, s[0].size() - 1) + " " + s[1]);
  return *one;
}

// A POST or PATCH: the vault as it is to be.
Result<vault::Vault> NextVault(const vault::Vault* cur, const std::string& id, V m,
                               const Json& body) {
  if (m == V::post) {
    if (cur) return MakeError(Code::kConflict, "sandbox " + id + " has a credential vault already");
    return ParseVaultCreate(body);
  }
  if (!cur) return NoVault(id, "credential vault");
  return ApplyVaultPatch(*cur, body);
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::CredentialVault(HttpContext& ctx, const std::string& id,
                                                      const std::vector<std::string>& s) {
  VaultBook* book = mgr_->vaults();
  if (!book) {
    Error e = MakeError(Code::kNotSupported, "credential vaults are not configured on this server");
    co_return co_await SendError(ctx, e);
  }
  auto rec = mgr_->Get(id);
  if (!rec.ok()) co_return co_await SendError(ctx, rec.error());
  if (rec->status == SandboxStatus::kStopped || rec->status == SandboxStatus::kFailed) {
    Error e = MakeError(Code::kSandboxNotFound, "sandbox " + id + " is " + StatusName(rec->status));
    co_return co_await SendError(ctx, e);
  }
  const V m = ctx.method();
  const vault::Vault* cur = book->Find(id);
  // (The routes admit GET on every path, the rest on the vault itself.)
  if (m == V::get) {
    auto answer = ReadVault(cur, id, s);
    if (!answer.ok()) co_return co_await SendError(ctx, answer.error());
    co_return co_await ctx.SendJson(200, *answer);
  }
  if (m == V::delete_) {
    if (!cur) {
      Error e = NoVault(id, "credential vault");
      co_return co_await SendError(ctx, e);
    }
    if (auto st = book->Replace(id, vault::Vault{}); !st.ok())
      co_return co_await SendError(ctx, st.error());
    if (auto settled = co_await Settled(id); !settled.ok())
      co_return co_await SendError(ctx, settled.error());
    co_return co_await ctx.SendEmpty(204);
  }
  auto text = co_await ctx.ReadBody(json_limit_);
  if (!text.ok()) co_return co_await SendError(ctx, text.error());
  const Json body = Json::parse(*text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    Error e = MakeError(Code::kInvalidRequest,
                        "the body must be a JSON object (not quoted here: it may hold a secret)");
    co_return co_await SendError(ctx, e);
  }
  auto next = NextVault(cur, id, m, body);
  if (!next.ok()) co_return co_await SendError(ctx, next.error());
  if (auto st = book->Replace(id, std::move(next).value()); !st.ok())
    co_return co_await SendError(ctx, st.error());
  // The answer is the acknowledgement: the egress side follows first.
  if (auto settled = co_await Settled(id); !settled.ok())
    co_return co_await SendError(ctx, settled.error());
  const vault::Vault* now = book->Find(id);
  const Json state = VaultStateJson(now ? *now : vault::Vault{});
  co_await ctx.SendJson(m == V::post ? 201 : 200, state);
}

asio::awaitable<Status> OpenSandboxApi::Settled(const std::string& id) {
  if (!vault_settled_) co_return Status{};
  co_return co_await vault_settled_(id);
}

}  // namespace hutch::api::opensandbox
