#include "net/veth_pair.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>

#include "net/net_policy.h"

namespace hutch::net {

Status CreateVethPair(RtNetlink& nl, const VethPairConfig& c) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  RtRequest r(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &m, sizeof(m));
  r.AttrString(IFLA_IFNAME, c.host_name);
  // IFLA_LINKINFO { KIND "veth", DATA { VETH_INFO_PEER { ifinfomsg,
  // IFLA_IFNAME, IFLA_NET_NS_FD } } }: the peer's own link message.
  const size_t info = r.Begin(IFLA_LINKINFO);
  r.AttrString(IFLA_INFO_KIND, "veth");
  const size_t data = r.Begin(IFLA_INFO_DATA);
  const size_t peer = r.Begin(VETH_INFO_PEER);
  ifinfomsg pm{};
  pm.ifi_family = AF_UNSPEC;
  r.Raw(&pm, sizeof(pm));
  r.AttrString(IFLA_IFNAME, c.peer_name);
  r.AttrU32(IFLA_NET_NS_FD, static_cast<uint32_t>(c.peer_netns_fd));
  r.End(peer);
  r.End(data);
  r.End(info);
  const std::string what = "link add " + c.host_name + " type veth peer " + c.peer_name;
  if (auto st = nl.Transact(r, what); !st.ok()) return st;

  auto finish = [&]() -> Status {
    auto idx = nl.LinkIndex(c.host_name);
    if (!idx.ok()) return idx.error();
    const std::string addr = Ipv4ToString(c.host_address) + "/" + std::to_string(c.prefix);
    if (auto st = nl.AddAddress(*idx, c.host_address, c.prefix,
                                "addr add " + addr + " dev " + c.host_name);
        !st.ok())
      return st;
    return nl.SetUp(*idx, "link set " + c.host_name + " up");
  };
  Status st = finish();
  if (!st.ok()) (void)nl.DeleteLink(c.host_name);
  return st;
}

}  // namespace hutch::net
