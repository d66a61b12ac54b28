#include "net/slot_plumbing.h"

#include <cerrno>

#include "net/named_netns.h"
#include "net/sandbox_link.h"
#include "net/veth_pair.h"

namespace hutch::net {

Status BuildSlot(RtNetlink& host, const SlotPlumbing& p) {
  auto ns = CreateNamedNetns(p.netns_dir, p.netns_name);
  if (!ns.ok()) return ns.error();
  VethPairConfig v;
  v.host_name = p.host_if;
  v.peer_netns_fd = ns->get();
  v.host_address = p.gateway;
  v.prefix = p.prefix;
  Status st = CreateVethPair(host, v);
  if (st.ok()) {
    // The sandbox's end, from a socket inside the namespace.
    auto in = RtNetlink::OpenIn(ns->get());
    if (!in.ok()) {
      st = in.error();
    } else {
      SandboxLinkConfig s;
      s.ifname = v.peer_name;
      s.address = p.address;
      s.prefix = p.prefix;
      s.gateway = p.gateway;
      st = ConfigureSandboxLink(*in, s);
    }
    if (!st.ok()) (void)host.DeleteLink(p.host_if);
  }
  if (!st.ok()) {
    (void)RemoveNamedNetns(p.netns_dir, p.netns_name);
    return st.error().Context("in " + p.netns_dir + "/" + p.netns_name);
  }
  return Status{};
}

Status TearDownSlot(RtNetlink& host, const SlotPlumbing& p) {
  Status link = host.DeleteLink(p.host_if);
  if (!link.ok() && link.error().err == ENODEV) link = Status{};
  Status ns = RemoveNamedNetns(p.netns_dir, p.netns_name);
  if (!link.ok()) return link;
  return ns;
}

}  // namespace hutch::net
