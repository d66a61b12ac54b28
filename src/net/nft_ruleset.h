// The nftables text hutchd feeds to `nft -f -`: one table per hutchd
// (`inet hutch_<prefix>`), whose base chains hold what every sandbox gets
// (the always-blocked destinations, NAT, no IPv6, no reach into the host)
// and per-sandbox chains and sets (keyed by the sandbox's subnet slot) hold
// its policy. Pure functions: each returns a script that nft applies as one
// atomic transaction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/net_policy.h"

namespace hutch::net {

struct NftNames {
  std::string prefix;  // this hutchd's short tag, also the interface prefix
  std::string table() const { return "hutch_" + prefix; }
  std::string host_if(int slot) const { return prefix + "v" + std::to_string(slot); }
  std::string if_glob() const { return prefix + "v*"; }
};

// What the base chains enforce for every sandbox of this server.
struct BaseTableOptions {
  Cidr pool;               // every sandbox subnet
  uint16_t dns_port = 53;  // where the resolver listens on each subnet's host-side address
  // Destinations no sandbox reaches in any mode (private, shared/CGNAT,
  // cloud fabric and the host's own networks; see NonPublicNetworks)
  // unless they fall in `allow_private` (the operator's --net-allow-private).
  std::vector<Cidr> non_public, allow_private;
  // Per sandbox address: connections tracked at once, and new connections
  // a second (with a burst of 2x); past either, new connections are
  // refused. Bounds what one sandbox can take of the host's conntrack
  // table, which every sandbox and the host share. 0: no limit.
  int max_connections = 4096;
  int new_connections_per_second = 500;
};

// Creates the table if missing and (re)writes its base chains; leaves the
// per-slot chains and sets as they are, so sandboxes that outlived a
// crashed hutchd stay filtered while the new one starts. DNS to the
// resolver is not connection-tracked (a query flood cannot fill the
// table).
std::string BaseTableScript(const NftNames& n, const BaseTableOptions& o);
// Creates slot's chain and sets if missing, hooks its interface to the
// chain and replaces its rules with `p` (flushing addresses learned by
// DNS when `flush_resolved`).
std::string SlotPolicyScript(const NftNames& n, int slot, const NetworkPolicy& p,
                             bool flush_resolved);
// Takes back the private-host exceptions SlotPolicyScript gave `slot`
// (fails if one is missing; empty when there are none).
std::string PrivateHostsRemoveScript(const NftNames& n, int slot,
                                     const std::vector<uint32_t>& hosts);
// Deletes slot's map element, chain and sets (fails if any is missing:
// callers fall back to SlotRemoveCommands one by one).
std::string SlotRemoveScript(const NftNames& n, int slot);
std::vector<std::string> SlotRemoveCommands(const NftNames& n, int slot);
// Puts addresses an allowed name resolved to in the slot's resolved set,
// each for `ttl_seconds` from now (an address already there gets the new
// timeout: re-adding an element does not extend it, so each is added,
// deleted and added again in the one transaction; the first add makes the
// delete safe when the element had just timed out).
std::string ResolvedScript(const NftNames& n, int slot, const std::vector<uint32_t>& addrs,
                           uint32_t ttl_seconds);
std::string DeleteTableScript(const NftNames& n);

}  // namespace hutch::net
