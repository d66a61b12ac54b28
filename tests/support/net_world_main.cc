// hutch-test-world: the network tests' outside world (NetWorld) for test
// drivers that are not C++, such as the SDK compatibility suites. Claims a
// free test network index (as a TestServer does), builds the world, prints
// one JSON line
//   {"index":N,"net_pool":"198.18.N.0/24","dns":"198.19.N.2:53",
//    "allowed":"198.19.N.2","denied":"198.19.N.3","world_net":"198.19.N.0/24"}
// and keeps both until SIGTERM or SIGINT, or until its parent dies (a
// killed test run); then removes the world. The caller runs its hutchd with --net-pool <net_pool>,
// --dns-upstream <dns> and --net-allow-private <world_net> (the world stands
// for the internet on non-public addresses) and stops it before stopping this. Exits 1 with
// the reason on stderr when the world cannot be built (not root, no ip).
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "tests/support/net_world.h"
#include "tests/support/test_server.h"

int main() {
  using hutch::testing::NetWorld;
  if (geteuid() != 0) {
    std::fprintf(stderr, "hutch-test-world: needs root (network namespaces)\n");
    return 1;
  }
  int lock_fd = -1;
  const int index = hutch::testing::ClaimNetIndex(&lock_fd);
  if (index < 0) {
    std::fprintf(stderr, "hutch-test-world: no free test network index\n");
    return 1;
  }
  // Blocked before the world exists so a stop request waits for it to be
  // whole (and is then handled by sigtimedwait below, which lets the
  // destructor remove it). The servers NetWorld starts inherit the mask;
  // they are stopped with SIGKILL.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  auto world = std::make_unique<NetWorld>(index);
  if (!world->ready()) {
    std::fprintf(stderr, "hutch-test-world: the world's servers did not answer\n");
    return 1;
  }
  const std::string pool = "198.18." + std::to_string(index) + ".0/24";
  const nlohmann::json line = {{"index", index},           {"net_pool", pool},
                               {"dns", world->Dns()},      {"allowed", world->Addr(2)},
                               {"denied", world->Addr(3)}, {"world_net", world->Addr(0) + "/24"}};
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  // Until a stop signal; the parent's end sends one (PR_SET_PDEATHSIG),
  // and getppid() catches a parent that died before prctl.
  const timespec tick{0, 200 * 1000 * 1000};
  while (sigtimedwait(&stop, nullptr, &tick) < 0 && getppid() == parent) {
  }
  world.reset();
  close(lock_fd);
  return 0;
}
