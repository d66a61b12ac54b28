#include "net/sandbox_link.h"

#include <arpa/inet.h>
#include <linux/rtnetlink.h>

#include "net/net_policy.h"

namespace hutch::net {

Status ConfigureSandboxLink(RtNetlink& nl, const SandboxLinkConfig& c) {
  auto lo = nl.LinkIndex("lo");
  if (!lo.ok()) return lo.error();
  auto eth = nl.LinkIndex(c.ifname);
  if (!eth.ok()) return eth.error();
  if (auto st = nl.SetUp(*lo, "link set lo up"); !st.ok()) return st;
  if (auto st = nl.AddAddress(*eth, c.address, c.prefix, "addr add " + Ipv4ToString(c.address));
      !st.ok())
    return st;
  if (auto st = nl.SetUp(*eth, "link set " + c.ifname + " up"); !st.ok()) return st;

  rtmsg r{};
  r.rtm_family = AF_INET;
  r.rtm_table = RT_TABLE_MAIN;
  r.rtm_protocol = RTPROT_BOOT;
  r.rtm_scope = RT_SCOPE_UNIVERSE;
  r.rtm_type = RTN_UNICAST;
  const uint32_t gw = htonl(c.gateway);
  RtRequest rr(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &r, sizeof(r));
  rr.Attr(RTA_GATEWAY, &gw, sizeof(gw));
  rr.AttrU32(RTA_OIF, static_cast<uint32_t>(*eth));
  return nl.Transact(rr, "route add default");
}

}  // namespace hutch::net
