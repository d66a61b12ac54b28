#include "common/net_dev.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/netns_thread.h"

namespace hutch {

NetDevTotals SumNetDev(std::istream& in, const std::string& only) {
  NetDevTotals out;
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (only.empty() ? name == "lo" : name != only) continue;
    std::istringstream f(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (auto& x : v) f >> x;
    out.rx_bytes += v[0];
    out.tx_bytes += v[8];
  }
  return out;
}

Result<NetDevTotals> NetDevInNetns(int netns_fd, const std::string& only) {
  NetDevTotals out;
  int err = 0;
  // /proc/thread-self/net shows the calling thread's namespace.
  auto entered = RunInNetns(netns_fd, [&] {
    std::ifstream in("/proc/thread-self/net/dev");
    if (!in) {
      err = errno ? errno : EIO;
      return;
    }
    out = SumNetDev(in, only);
  });
  if (!entered.ok())
    return entered.error().Context("interface counters of a sandbox network namespace");
  if (err != 0) return ErrnoError("interface counters of a sandbox network namespace", err);
  return out;
}

}  // namespace hutch
