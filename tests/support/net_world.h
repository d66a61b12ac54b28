// A test's "outside world", in a network namespace the test creates:
// two HTTP servers on 198.19.<n>.2 and .3 (port 8080, answering
// "allowed-server" and "denied-server"), a DNS server on .2 answering
// allowed.test and denied.test (and api.vault.test, other.vault.test: .2 and
// .3, for a test's HTTPS server, tests/support/world_https.py), and a fake
// cloud metadata server on 169.254.169.254, and an HTTP server on port
// 8081 answering "private-server" on non-public addresses: 172.31.<n>.2
// (RFC 1918), 100.100.100.200 (CGNAT) and 168.63.129.16. `n` is the index of a test
// server's network pool (TestServer::net_index, ClaimNetIndex), which
// keeps worlds of tests running at once apart. Everything is removed on
// destruction (and what a killed earlier run of the same index left, on
// construction). Used by tests/api_network_test.cc and, through
// hutch-test-world, by the SDK compatibility suites.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hutch::testing {

class NetWorld {
 public:
  explicit NetWorld(int n);
  ~NetWorld();
  NetWorld(const NetWorld&) = delete;
  NetWorld& operator=(const NetWorld&) = delete;

  // Every server answered the host.
  bool ready() const { return ready_; }
  std::string Addr(int host) const { return net_ + std::to_string(host); }
  std::string Dns() const { return net_ + "2:53"; }
  // The world's RFC 1918 network and the address its private server has there.
  std::string PrivateNet() const { return "172.31." + std::to_string(n_) + ".0/24"; }
  std::string PrivateAddr() const { return "172.31." + std::to_string(n_) + ".2"; }
  // Runs `argv` inside the world's namespace until the world goes (its
  // output discarded): a server a test adds.
  void Spawn(std::vector<std::string> argv);

 private:
  void Sh(const std::string& cmd);
  void Teardown();
  int n_;
  std::string ns_, host_if_, net_, dir_;
  std::vector<pid_t> pids_;
  bool ready_ = false;
};

}  // namespace hutch::testing
