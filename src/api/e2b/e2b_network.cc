// E2B's egress settings as a hutch policy. E2B sandboxes reach the
// internet unless told otherwise, so nothing given means mode all (or none
// when this server has no networking: creates keep working, and /healthz
// says why). `denyOut` listing 0.0.0.0/0 (E2B's "all traffic") or
// allow_internet_access false makes the default deny, with `allowOut` as
// the exceptions; otherwise the default is allow and `denyOut` is blocked.
// `rules` (per-host header transforms) become the sandbox's credential
// vault (e2b_vault.h).
// E2B lets an allowOut entry beat a denyOut entry; hutch lets deny win,
// which differs only when an allowed entry lies inside a denied CIDR
// (docs/compat-e2b.md).
#include "api/e2b/e2b_network.h"

#include "api/e2b/e2b_api.h"
#include "api/e2b/e2b_vault.h"

#include <algorithm>
#include <string>

namespace hutch::api::e2b {

Result<std::optional<bool>> InternetAccessField(const Json& j) {
  auto it = j.find("allow_internet_access");
  if (it == j.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean())
    return MakeError(Code::kInvalidRequest, "'allow_internet_access' must be a boolean");
  return std::optional<bool>(it->get<bool>());
}

Result<net::NetworkPolicy> E2bEgressPolicy(const Json* egress, std::optional<bool> internet,
                                           bool networking,
                                           std::initializer_list<const char*> ignored) {
  if (egress == nullptr || egress->is_null()) {
    net::NetworkPolicy p;
    p.mode = internet.value_or(networking) ? net::NetMode::kAll : net::NetMode::kNone;
    return p;
  }
  if (!egress->is_object()) return MakeError(Code::kInvalidRequest, "'network' must be an object");
  Json allow = Json::array(), deny = Json::array();
  bool deny_all = internet.has_value() && !*internet;
  for (const auto& item : egress->items()) {
    const std::string& k = item.key();
    const Json& v = item.value();
    if (v.is_null()) continue;
    if (std::any_of(ignored.begin(), ignored.end(), [&k](const char* i) { return k == i; }))
      continue;
    if (k != "allowOut" && k != "denyOut")
      return MakeError(Code::kNotSupported,
                       "'network." + k + "' is not supported by hutch (docs/compat-e2b.md)");
    if (!v.is_array())
      return MakeError(Code::kInvalidRequest, "'network." + k + "' must be an array of strings");
    for (const auto& e : v) {
      if (!e.is_string())
        return MakeError(Code::kInvalidRequest, "'network." + k + "' must be an array of strings");
      const std::string s = e.get<std::string>();
      if (k == "denyOut" && s == "0.0.0.0/0") deny_all = true;
      else (k == "allowOut" ? allow : deny).push_back(s);
    }
  }
  const Json p = {{"mode", "policy"},
                  {"default", deny_all ? "deny" : "allow"},
                  {"allow", allow},
                  {"deny", deny}};
  return net::ParseNetworkPolicy(p);
}

// `PUT /sandboxes/{id}/network`: the body replaces every egress rule (a
// list left out is cleared, as E2B's update does); the new policy holds
// for new connections at once (SandboxManager::SetNetworkPolicy).
asio::awaitable<void> E2bApi::UpdateNetwork(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendControlError(ctx, body.error());
  if (!body->is_object()) {
    Error e = MakeError(Code::kInvalidRequest, "the body must be a JSON object");
    co_return co_await SendControlError(ctx, e);
  }
  auto internet = InternetAccessField(*body);
  if (!internet.ok()) co_return co_await SendControlError(ctx, internet.error());
  auto policy = E2bEgressPolicy(&*body, *internet, mgr_->network() != nullptr,
                                {"allow_internet_access", "rules"});
  if (!policy.ok()) co_return co_await SendControlError(ctx, policy.error());
  // `rules` replaces the header rules (the sandbox's vault); left out, it
  // clears them, as E2B's update does for every field.
  auto rules = E2bRulesVault(&*body);
  if (!rules.ok()) co_return co_await SendControlError(ctx, rules.error());
  if (auto rec = Visible(mgr_, id); !rec.ok())
    co_return co_await SendControlError(ctx, rec.error());
  auto rec = co_await mgr_->SetNetworkPolicy(id, std::move(policy).value());
  if (!rec.ok()) co_return co_await SendControlError(ctx, rec.error());
  if (mgr_->vaults() && (*rules || mgr_->vaults()->Find(id))) {
    auto st = co_await PutRulesVault(id, rules->value_or(vault::Vault{}));
    if (!st.ok()) co_return co_await SendControlError(ctx, st.error());
  } else if (*rules) {
    Error e = MakeError(Code::kNotSupported,
                        "'rules': credential vaults are not configured on this server");
    co_return co_await SendControlError(ctx, e);
  }
  co_await ctx.SendEmpty(204);
}

asio::awaitable<Status> E2bApi::PutRulesVault(const std::string& id, vault::Vault v) {
  if (auto st = mgr_->vaults()->Replace(id, std::move(v)); !st.ok()) co_return st;
  if (!vault_settled_) co_return Status{};
  co_return co_await vault_settled_(id);
}

}  // namespace hutch::api::e2b
