// /v1/sandboxes/{id}/vault: a sandbox's credential vault (core/vault.h,
// docs/api.md "Credential vault"). Reads answer names and bindings, never a
// value; a request body that does not parse is refused without quoting it,
// since it may hold a secret.
#include "api/v1/v1_api.h"

namespace hutch::api {

namespace {

Error NoVaults() {
  return MakeError(Code::kNotSupported, "credential vaults are not configured on this server");
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> V1Api::ReadSecretJson(HttpContext& ctx) {
  auto body = co_await ctx.ReadBody(cfg_.json_body_limit);
  if (!body.ok()) co_return body.error();
  if (body->empty()) co_return nlohmann::json::object();
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    co_return MakeError(Code::kInvalidRequest,
                        "request body must be a JSON object (not quoted here: it may hold a "
                        "secret)");
  co_return j;
}

asio::awaitable<Status> V1Api::Settled(const std::string& id) {
  if (!cfg_.vault_settled) co_return Status{};
  co_return co_await cfg_.vault_settled(id);
}

asio::awaitable<void> V1Api::RouteVault(HttpContext& ctx, const std::string& id, std::string kind,
                                        std::string name) {
  VaultBook* book = mgr_->vaults();
  if (!book) co_return co_await ctx.SendError(NoVaults());
  auto rec = mgr_->Get(id);
  if (!rec.ok()) co_return co_await ctx.SendError(rec.error());
  if (rec->status == SandboxStatus::kStopped || rec->status == SandboxStatus::kFailed)
    co_return co_await ctx.SendError(
        MakeError(Code::kSandboxNotFound, "sandbox " + id + " is " + StatusName(rec->status)));
  const auto method = ctx.method();
  if (kind.empty() && method == http::verb::get)
    co_return co_await ctx.SendJson(200, book->View(id));
  if (method == http::verb::delete_) {
    const Status st =
        kind == "credentials" ? book->DeleteCredential(id, name) : book->DeleteBinding(id, name);
    if (!st.ok()) co_return co_await ctx.SendError(st.error());
    if (auto settled = co_await Settled(id); !settled.ok())
      co_return co_await ctx.SendError(settled.error());
    co_return co_await ctx.SendEmpty(204);
  }
  auto body = co_await ReadSecretJson(ctx);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  Status st;
  if (kind.empty()) {
    auto v = vault::ParseVault(*body, book->sources());
    st = v.ok() ? book->Replace(id, std::move(v).value()) : Status(v.error());
  } else {
    (*body)["name"] = name;  // the path names it
    if (kind == "credentials") {
      auto c = vault::ParseCredential(*body, book->sources());
      st = c.ok() ? book->PutCredential(id, std::move(c).value()) : Status(c.error());
    } else {
      auto b = vault::ParseBinding(*body);
      st = b.ok() ? book->PutBinding(id, std::move(b).value()) : Status(b.error());
    }
  }
  if (!st.ok()) co_return co_await ctx.SendError(st.error());
  if (auto settled = co_await Settled(id); !settled.ok())
    co_return co_await ctx.SendError(settled.error());
  co_await ctx.SendJson(200, book->View(id));
}

}  // namespace hutch::api
