#include "net/nft_ruleset.h"

namespace hutch::net {

namespace {

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string Elements(const std::vector<Cidr>& cs) {
  std::string out;
  for (const auto& c : cs) out += (out.empty() ? "" : ", ") + c.ToString();
  return out;
}

// `"<if>" . a, ...` for the privslot set.
std::string PrivateElements(const NftNames& n, int slot, const std::vector<uint32_t>& hosts) {
  std::string out;
  for (uint32_t a : hosts)
    out += (out.empty() ? "" : ", ") + Quote(n.host_if(slot)) + " . " + Ipv4ToString(a);
  return out;
}

}  // namespace

std::string BaseTableScript(const NftNames& n, const BaseTableOptions& o) {
  const std::string t = "inet " + n.table();
  const std::string g = Quote(n.if_glob());
  const std::string p = o.pool.ToString();
  const std::string port = std::to_string(o.dns_port);
  std::string s;
  s += "add table " + t + "\n";
  s += "add map " + t + " sbx { type ifname : verdict; }\n";
  // Priority just before the usual filter chains: whatever another table
  // accepts, a drop here still holds (every base chain on a hook runs).
  s += "add chain " + t + " input { type filter hook input priority filter - 5; policy accept; }\n";
  s += "add chain " + t +
       " forward { type filter hook forward priority filter - 5; policy accept; }\n";
  s += "add chain " + t +
       " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n";
  s += "flush chain " + t + " input\n";
  s += "flush chain " + t + " forward\n";
  s += "flush chain " + t + " postrouting\n";
  // Not the public internet: refused in every mode, whatever a sandbox's
  // own policy allows, unless the operator allowed the range.
  s += "add set " + t + " nonpublic { type ipv4_addr; flags interval; auto-merge; }\n";
  s += "add set " + t + " privok { type ipv4_addr; flags interval; auto-merge; }\n";
  // Per-interface exceptions (NetworkPolicy::private_hosts). Flushed with
  // the base chains: a restarted hutchd re-adds those of what it adopts.
  s += "add set " + t + " privslot { type ifname . ipv4_addr; }\n";
  s += "flush set " + t + " nonpublic\n";
  s += "flush set " + t + " privok\n";
  s += "flush set " + t + " privslot\n";
  if (!o.non_public.empty())
    s += "add element " + t + " nonpublic { " + Elements(o.non_public) + " }\n";
  if (!o.allow_private.empty())
    s += "add element " + t + " privok { " + Elements(o.allow_private) + " }\n";
  // Per-sandbox connection counts and rates (dynamic sets keyed by the
  // sandbox's address; an element lives as long as its connections).
  s += "add set " + t + " ctcount { type ipv4_addr; flags dynamic; size 65536; }\n";
  s += "add set " + t +
       " ctrate { type ipv4_addr; flags dynamic,timeout; size 65536; timeout 60s; }\n";
  // DNS between a sandbox and its resolver bypasses conntrack: raw
  // priority, before a connection-tracking entry exists.
  s += "add chain " + t + " rawpre { type filter hook prerouting priority raw; policy accept; }\n";
  s += "add chain " + t + " rawout { type filter hook output priority raw; policy accept; }\n";
  s += "flush chain " + t + " rawpre\n";
  s += "flush chain " + t + " rawout\n";
  for (const char* proto : {"udp", "tcp"}) {
    s += "add rule " + t + " rawpre iifname " + g + " ip daddr " + p + " " + proto + " dport " +
         port + " notrack\n";
    s += "add rule " + t + " rawout oifname " + g + " ip saddr " + p + " " + proto + " sport " +
         port + " notrack\n";
  }
  // Into the host from a sandbox: only DNS to the resolver on its
  // gateway address. hutchd's API, sshd, anything listening on any host
  // address (a packet for a local address never reaches `forward`) is
  // dropped here.
  s += "add rule " + t + " input iifname " + g + " ip daddr " + p + " udp dport " + port +
       " accept\n";
  s += "add rule " + t + " input iifname " + g + " ip daddr " + p + " tcp dport " + port +
       " accept\n";
  s += "add rule " + t + " input iifname " + g + " drop\n";
  // Through the host. Always blocked, whatever the policy: IPv6 (the
  // sandbox has no IPv6 address; this is the second wall), "this network",
  // link-local with the cloud metadata address, multicast, reserved and
  // broadcast, and every sandbox subnet (neighbours).
  s += "add rule " + t + " forward iifname " + g + " meta nfproto ipv6 drop\n";
  s += "add rule " + t + " forward oifname " + g + " meta nfproto ipv6 drop\n";
  s += "add rule " + t + " forward iifname " + g +
       " ip daddr { 0.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3 } drop\n";
  s += "add rule " + t + " forward iifname " + g + " ip daddr " + p + " drop\n";
  s += "add rule " + t + " forward iifname " + g +
       " fib daddr type { broadcast, multicast, local } drop\n";
  s += "add rule " + t + " forward iifname " + g +
       " ip daddr @nonpublic ip daddr != @privok iifname . ip daddr != @privslot " +
       "reject with icmpx type admin-prohibited\n";
  // A policy change holds for new connections; flows it admitted go on.
  s += "add rule " + t + " forward iifname " + g + " ct state established,related accept\n";
  const std::string refuse = " reject with icmpx type admin-prohibited\n";
  if (o.max_connections > 0)
    s += "add rule " + t + " forward iifname " + g +
         " ct state new add @ctcount { ip saddr ct count over " +
         std::to_string(o.max_connections) + " }" + refuse;
  if (o.new_connections_per_second > 0)
    s += "add rule " + t + " forward iifname " + g +
         " ct state new add @ctrate { ip saddr limit rate over " +
         std::to_string(o.new_connections_per_second) + "/second burst " +
         std::to_string(2 * o.new_connections_per_second) + " packets }" + refuse;
  s += "add rule " + t + " forward iifname " + g + " iifname vmap @sbx\n";
  // An interface of ours without a policy (a warm namespace) sends nothing.
  s += "add rule " + t + " forward iifname " + g + " drop\n";
  // Into a sandbox: only replies. Nothing outside may open a connection
  // to a sandbox (exposed ports go through hutchd, not through here).
  s += "add rule " + t + " forward oifname " + g + " ct state established,related accept\n";
  s += "add rule " + t + " forward oifname " + g + " drop\n";
  s += "add rule " + t + " postrouting ip saddr " + p + " ip daddr != " + p + " oifname != " + g +
       " masquerade\n";
  return s;
}

std::string SlotPolicyScript(const NftNames& n, int slot, const NetworkPolicy& p,
                             bool flush_resolved) {
  const std::string t = "inet " + n.table();
  const std::string k = std::to_string(slot);
  std::string s;
  s += "add set " + t + " a" + k + " { type ipv4_addr; flags interval; auto-merge; }\n";
  s += "add set " + t + " d" + k + " { type ipv4_addr; flags interval; auto-merge; }\n";
  s += "add set " + t + " r" + k + " { type ipv4_addr; flags timeout; }\n";
  s += "add chain " + t + " s" + k + "\n";
  s += "flush chain " + t + " s" + k + "\n";
  s += "flush set " + t + " a" + k + "\n";
  s += "flush set " + t + " d" + k + "\n";
  if (flush_resolved) s += "flush set " + t + " r" + k + "\n";
  // Refused connections fail at once (a TCP reset / ICMP admin-prohibited)
  // rather than after the client's timeout.
  const std::string refuse = "reject with icmpx type admin-prohibited";
  switch (p.mode) {
    case NetMode::kNone:
      s += "add rule " + t + " s" + k + " " + refuse + "\n";
      break;
    case NetMode::kAll:
      s += "add rule " + t + " s" + k + " accept\n";
      break;
    case NetMode::kPolicy:
      if (!p.allow_cidrs.empty())
        s += "add element " + t + " a" + k + " { " + Elements(p.allow_cidrs) + " }\n";
      if (!p.deny_cidrs.empty())
        s += "add element " + t + " d" + k + " { " + Elements(p.deny_cidrs) + " }\n";
      // A deny rule wins over an allow rule; addresses of allowed names
      // count as allowed; then the default.
      s += "add rule " + t + " s" + k + " ip daddr @d" + k + " " + refuse + "\n";
      s += "add rule " + t + " s" + k + " ip daddr @a" + k + " accept\n";
      s += "add rule " + t + " s" + k + " ip daddr @r" + k + " accept\n";
      s += "add rule " + t + " s" + k + " " + (p.default_allow ? "accept" : refuse) + "\n";
      break;
  }
  if (!p.private_hosts.empty())
    s += "add element " + t + " privslot { " + PrivateElements(n, slot, p.private_hosts) + " }\n";
  s += "add element " + t + " sbx { " + Quote(n.host_if(slot)) + " : jump s" + k + " }\n";
  return s;
}

std::string PrivateHostsRemoveScript(const NftNames& n, int slot,
                                     const std::vector<uint32_t>& hosts) {
  if (hosts.empty()) return "";
  return "delete element inet " + n.table() + " privslot { " + PrivateElements(n, slot, hosts) +
         " }\n";
}

std::vector<std::string> SlotRemoveCommands(const NftNames& n, int slot) {
  const std::string t = "inet " + n.table();
  const std::string k = std::to_string(slot);
  // The map element first: it references the chain.
  return {"delete element " + t + " sbx { " + Quote(n.host_if(slot)) + " }",
          "delete chain " + t + " s" + k, "delete set " + t + " a" + k,
          "delete set " + t + " d" + k, "delete set " + t + " r" + k};
}

std::string SlotRemoveScript(const NftNames& n, int slot) {
  std::string s;
  for (const auto& c : SlotRemoveCommands(n, slot)) s += c + "\n";
  return s;
}

std::string ResolvedScript(const NftNames& n, int slot, const std::vector<uint32_t>& addrs,
                           uint32_t ttl_seconds) {
  if (addrs.empty()) return "";
  const std::string set = "inet " + n.table() + " r" + std::to_string(slot);
  std::string timed, plain;
  for (uint32_t a : addrs) {
    timed += (timed.empty() ? "" : ", ") + Ipv4ToString(a) + " timeout " +
             std::to_string(ttl_seconds) + "s";
    plain += (plain.empty() ? "" : ", ") + Ipv4ToString(a);
  }
  return "add element " + set + " { " + timed + " }\ndelete element " + set + " { " + plain +
         " }\nadd element " + set + " { " + timed + " }\n";
}

std::string DeleteTableScript(const NftNames& n) { return "delete table inet " + n.table() + "\n"; }

}  // namespace hutch::net
