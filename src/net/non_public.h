// Which IPv4 destinations are not "the public internet" for a sandbox in
// mode `all` (or a policy that allows an address): private and shared
// address space, special-purpose ranges, cloud fabric endpoints, and the
// networks the host itself sits on. hutchd refuses them in every mode
// unless the operator allows a range (--net-allow-private), because a
// sandbox reaching them reaches the operator's own infrastructure: other
// machines of the LAN, a CGNAT-side metadata service (100.100.100.200),
// Azure's wireserver (168.63.129.16).
#pragma once

#include <string>
#include <vector>

#include "net/net_policy.h"

namespace hutch::net {

// The fixed ranges (IANA special-purpose registry entries that are not
// globally reachable, and the cloud endpoints above).
std::vector<Cidr> SpecialPurposeNetworks();

// The IPv4 networks of the host's interfaces (address & mask), except
// loopback, interfaces whose name starts with `own_if_prefix` (this
// server's sandbox links) and networks inside `pool`. Read once at start:
// an interface that appears later is not added.
std::vector<Cidr> HostNetworks(const Cidr& pool, const std::string& own_if_prefix);

// SpecialPurposeNetworks() plus `host`, for BaseTableScript.
std::vector<Cidr> NonPublicNetworks(const std::vector<Cidr>& host);

}  // namespace hutch::net
