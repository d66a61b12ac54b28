// E2B's egress settings (`allowOut`, `denyOut`, `allow_internet_access`),
// at create (the `network` object) and on `PUT /sandboxes/{id}/network`
// (the same lists at the top of the body), as one hutch NetworkPolicy.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "net/net_policy.h"

namespace hutch::api::e2b {

// `egress`: the object holding allowOut/denyOut (null: none given);
// `internet`: allow_internet_access when given; `networking`: whether
// this server has sandbox networking (an unspecified setting then means
// mode all, else none). `ignored`: keys of `egress` that are not about
// egress and are skipped (the create body's allowPublicTraffic, the
// update body's allow_internet_access); any other key hutch does not map
// is refused as not_supported, naming it.
Result<net::NetworkPolicy> E2bEgressPolicy(const nlohmann::json* egress,
                                           std::optional<bool> internet, bool networking,
                                           std::initializer_list<const char*> ignored);

// allow_internet_access of `j`, when given; an error when not a boolean.
Result<std::optional<bool>> InternetAccessField(const nlohmann::json& j);

}  // namespace hutch::api::e2b
