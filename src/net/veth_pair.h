// A slot's veth pair, made from hutchd over rtnetlink (net/rtnetlink.h)
// instead of an `ip link add` process: the host's end in the host's
// namespace, with its address and up; the peer created directly inside the
// sandbox's namespace (IFLA_NET_NS_FD), so it never appears on the host.
// Deleting the host's end deletes the peer with it.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "net/rtnetlink.h"

namespace hutch::net {

struct VethPairConfig {
  std::string host_name;           // in the host's namespace
  std::string peer_name = "eth0";  // inside the namespace
  int peer_netns_fd = -1;          // where the peer is created
  uint32_t host_address = 0;       // host byte order
  int prefix = 30;
};

// `host`: a socket in the host's namespace. Blocking. On failure after the
// pair was made, the pair is deleted again.
Status CreateVethPair(RtNetlink& host, const VethPairConfig& c);

}  // namespace hutch::net
