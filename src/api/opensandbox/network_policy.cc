#include "api/opensandbox/network_policy.h"

namespace hutch::api::opensandbox {

Status CheckNetworkPolicy(const nlohmann::json& policy) {
  if (policy.is_null()) return {};
  if (!policy.is_object()) return MakeError(Code::kInvalidRequest, "'networkPolicy' must be an object");
  const std::string def = policy.value("defaultAction", "deny");
  bool opens = def != "deny";
  if (auto it = policy.find("egress"); it != policy.end() && !it->is_null()) {
    if (!it->is_array()) return MakeError(Code::kInvalidRequest, "'networkPolicy.egress' must be an array");
    for (const auto& r : *it)
      if (!r.is_object() || r.value("action", "") != "deny") opens = true;
  }
  if (opens)
    return MakeError(Code::kNotSupported,
                     "networkPolicy: hutch sandboxes have no egress yet (loopback only), so only a deny-all policy "
                     "can be honoured (docs/compat-opensandbox.md)");
  return {};
}

nlohmann::json EgressPolicyOf(const SandboxRecord& rec) {
  (void)rec;  // every sandbox has the same policy until networking lands
  return {{"status", "ok"},
          {"mode", "deny_all"},
          {"enforcementMode", "network-namespace"},
          {"policy", {{"defaultAction", "deny"}, {"egress", nlohmann::json::array()}}}};
}

Status ApplyEgressChange(const SandboxRecord& rec, const nlohmann::json& change) {
  (void)change;
  return MakeError(Code::kNotSupported, "sandbox " + rec.id +
                                            ": changing egress rules is not supported until hutch has networking; the "
                                            "sandbox stays loopback-only (docs/compat-opensandbox.md)");
}

}  // namespace hutch::api::opensandbox
