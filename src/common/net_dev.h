// Byte counters of network interfaces, as /proc/net/dev shows them for
// one network namespace: a jail sandbox's (through a process in it) or a
// vm sandbox's slot (through a short-lived thread that enters it).
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "common/result.h"

namespace hutch {

struct NetDevTotals {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
};

// Sums /proc/net/dev text over every interface except loopback, or over
// the one named `only` when it is not empty.
NetDevTotals SumNetDev(std::istream& in, const std::string& only = "");

// The same for the network namespace `netns_fd` names.
Result<NetDevTotals> NetDevInNetns(int netns_fd, const std::string& only = "");

}  // namespace hutch
