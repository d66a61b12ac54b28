// The sandbox's end of a network slot, configured from hutchd itself over
// rtnetlink: loopback up, `eth0` with its address and up, the default
// route through the host's end. Spawning `ip -n <ns>` for these four
// requests cost a process start (≈ 10 ms here) per slot, on the path that
// refills warm slots while creates are waiting for them; the requests
// themselves take microseconds.
//
// The netlink socket is created inside the namespace by a short-lived
// thread (common/netns_thread): the socket stays bound to that
// namespace, hutchd's own threads never leave the host's.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hutch::net {

struct SandboxLinkConfig {
  std::string netns_path;       // a bind mount of the namespace (/run/netns/…)
  std::string ifname = "eth0";  // the veth peer already inside it
  uint32_t address = 0;         // host byte order
  int prefix = 30;
  uint32_t gateway = 0;         // host byte order
};

// Blocking; each request is acknowledged by the kernel before the next.
Status ConfigureSandboxLink(const SandboxLinkConfig& c);

}  // namespace hutch::net
