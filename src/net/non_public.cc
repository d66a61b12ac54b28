#include "net/non_public.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <memory>

namespace hutch::net {

namespace {

Cidr Net(const char* addr, int prefix) {
  Cidr c;
  ParseIpv4(addr, &c.addr);
  c.prefix = prefix;
  return c;
}

bool Inside(const Cidr& inner, const Cidr& outer) {
  return inner.prefix >= outer.prefix && outer.Contains(inner.addr);
}

}  // namespace

std::vector<Cidr> SpecialPurposeNetworks() {
  // (0.0.0.0/8, 169.254.0.0/16 and 224.0.0.0/3 are dropped by rules of
  // their own that no operator setting opens.)
  return {
      Net("10.0.0.0", 8),      // RFC 1918 private
      Net("172.16.0.0", 12),   // RFC 1918 private
      Net("192.168.0.0", 16),  // RFC 1918 private
      Net("100.64.0.0",
          10),  // RFC 6598 shared address space (CGNAT; Alibaba's metadata 100.100.100.200)
      Net("127.0.0.0", 8),       // loopback (not routable, refused all the same)
      Net("192.0.0.0", 24),      // IETF protocol assignments
      Net("192.0.2.0", 24),      // documentation (TEST-NET-1)
      Net("198.51.100.0", 24),   // documentation (TEST-NET-2)
      Net("203.0.113.0", 24),    // documentation (TEST-NET-3)
      Net("198.18.0.0", 15),     // benchmarking
      Net("168.63.129.16", 32),  // Azure's wireserver / DNS / health endpoint
  };
}

std::vector<Cidr> HostNetworks(const Cidr& pool, const std::string& own_if_prefix) {
  std::vector<Cidr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, freeifaddrs);
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) continue;
    const std::string name = i->ifa_name ? i->ifa_name : "";
    if (name == "lo" || (!own_if_prefix.empty() && name.rfind(own_if_prefix, 0) == 0)) continue;
    const uint32_t addr = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    const uint32_t mask =
        ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
    Cidr c;
    c.addr = addr & mask;
    c.prefix = __builtin_popcount(mask);
    if (Inside(c, pool)) continue;
    bool dup = false;
    for (const auto& o : out) dup |= o == c;
    if (!dup) out.push_back(c);
  }
  return out;
}

std::vector<Cidr> NonPublicNetworks(const std::vector<Cidr>& host) {
  std::vector<Cidr> out = SpecialPurposeNetworks();
  out.insert(out.end(), host.begin(), host.end());
  return out;
}

}  // namespace hutch::net
