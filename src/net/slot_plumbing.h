// A network slot's kernel objects, made and removed from hutchd itself:
// the named namespace (named_netns.h), the veth pair with the host's end
// addressed and up (veth_pair.h), and the sandbox's end inside
// (sandbox_link.h). No process is started: these were `ip netns add`,
// `ip link add … netns`, `ip addr`, `ip link set up` in one `ip -batch`
// run, and `ip -force -batch` with `link del` and `netns del` to remove —
// each run ≈ 10–25 ms of process start and netlink cache on this path,
// which competed with the creates the warm pool exists to serve.
//
// Blocking, a few milliseconds per slot (the namespace's creation is most
// of it); NetworkManager calls these on its BlockingWorker's thread, the
// only thread that uses `host`.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "net/rtnetlink.h"

namespace hutch::net {

struct SlotPlumbing {
  std::string netns_dir;
  std::string netns_name;  // <netns_dir>/<netns_name> is the namespace
  std::string host_if;     // the host's end of the veth pair
  uint32_t gateway = 0;    // the host's end, host byte order
  uint32_t address = 0;    // the sandbox's eth0
  int prefix = 30;
};

// Makes the namespace, the pair and both ends' configuration. On failure
// removes what it made (and nothing it found there: a name already taken
// is someone else's) and says what failed.
Status BuildSlot(RtNetlink& host, const SlotPlumbing& p);

// Deletes the host's end (its peer goes with it, even while a process
// still holds the namespace) and unbinds the namespace. What is already
// gone is skipped; each step is tried whatever the other's outcome.
Status TearDownSlot(RtNetlink& host, const SlotPlumbing& p);

}  // namespace hutch::net
