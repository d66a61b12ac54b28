// The sandbox's end of a network slot, configured from hutchd itself over
// rtnetlink (net/rtnetlink.h): loopback up, `eth0` with its address and
// up, the default route through the host's end. Spawning `ip -n <ns>` for
// these four requests cost a process start (≈ 10 ms here) per slot, on
// the path that refills warm slots while creates are waiting for them;
// the requests themselves take microseconds.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "net/rtnetlink.h"

namespace hutch::net {

struct SandboxLinkConfig {
  std::string ifname = "eth0";  // the veth peer already inside the namespace
  uint32_t address = 0;         // host byte order
  int prefix = 30;
  uint32_t gateway = 0;  // host byte order
};

// `in_ns`: a socket opened inside the sandbox's namespace
// (RtNetlink::OpenIn). Blocking; each request is acknowledged by the kernel
// before the next.
Status ConfigureSandboxLink(RtNetlink& in_ns, const SandboxLinkConfig& c);

}  // namespace hutch::net
