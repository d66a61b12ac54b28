// Design item 5 (security-and-reliability.md), for the one network mode
// this hutchd has: none. A sandbox has nothing but its own loopback: no
// other interface, no route, and the host's ports (hutchd's API port
// included), the host's own addresses, link-local and the metadata address
// 169.254.169.254 are unreachable. The items that need other modes
// (allowlists and their bypass by raw IP, DNS or IPv6) wait for the
// networking work; docs/security.md lists them.
//
// With the vm driver (HUTCH_TEST_DRIVER=vm) the same probes run in the
// guest (a VM without a NIC: loopback only), and the host-ports test also
// shows the layer below: the QEMU process itself sits in an empty network
// namespace, so even an escaped QEMU reaches nothing.
#include <arpa/inet.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/shared_server.h"
#include "tests/vm/vm_support.h"

using hutch::testing::HostSh;
using hutch::testing::OnVm;
using hutch::testing::StdoutOf;

namespace {

// A listening TCP socket on the host (all addresses, any port).
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd_, 16) == 0) {
      socklen_t len = sizeof a;
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }
  // Accepts (and closes) everything queued; returns how many.
  int Drain() {
    int n = 0;
    for (int c; (c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) close(c);
    return n;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

bool HostConnect(const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// The host's non-loopback IPv4 addresses.
std::vector<std::string> HostAddresses() {
  std::vector<std::string> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::string(buf).rfind("127.", 0) != 0) out.push_back(buf);
  }
  freeifaddrs(ifs);
  return out;
}

struct Attempt {
  std::string host;
  int port = 0;
  std::string verdict;
  int err = 0;
};

class Network : public hutch::testing::SharedServerTest {
 protected:
  // TCP connects from inside the sandbox, 3 s each.
  static std::vector<Attempt> ConnectFromInside(
      const std::vector<std::pair<std::string, int>>& targets) {
    std::string list = "[";
    for (const auto& [h, p] : targets) list += "('" + h + "', " + std::to_string(p) + "),";
    list += "]";
    auto r = Exec(
        "python3 -c \"\n"
        "import socket\n"
        "for h, p in " +
        list +
        ":\n"
        "  fam = socket.AF_INET6 if ':' in h else socket.AF_INET\n"
        "  s = socket.socket(fam); s.settimeout(3)\n"
        "  try:\n"
        "    s.connect((h, p)); print(h, p, 'CONNECTED', 0)\n"
        "  except OSError as e:\n"
        "    print(h, p, 'FAILED', e.errno or 0)\n"
        "\"");
    std::vector<Attempt> out;
    std::istringstream in(StdoutOf(r));
    Attempt a;
    while (in >> a.host >> a.port >> a.verdict >> a.err) out.push_back(a);
    EXPECT_EQ(out.size(), targets.size()) << r.dump();
    return out;
  }
};

}  // namespace

TEST_F(Network, ModeNoneHasOnlyLoopback) {
  // Interfaces (IPv4 and IPv6) and routes: lo, and nothing else.
  EXPECT_EQ(Sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"), "lo\n");
  EXPECT_EQ(
      Sh("awk '{print $6}' /proc/net/if_inet6 2>/dev/null | sort -u | grep -v '^lo$' | wc -l"),
      "0\n");
  EXPECT_EQ(Sh("tail -n +2 /proc/net/route | wc -l"), "0\n");
  // Loopback works inside (the control for the failures below).
  EXPECT_EQ(
      Sh("python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); "
         "c=socket.create_connection(s.getsockname()); print('ok')\""),
      "ok\n");
}

TEST_F(Network, HostPortsAreUnreachable) {
  Listener l;
  ASSERT_GT(l.port(), 0);
  // Control: from the host, these accept connections.
  EXPECT_TRUE(HostConnect("127.0.0.1", l.port()));
  EXPECT_TRUE(HostConnect("127.0.0.1", server().port()));
  const auto addrs = HostAddresses();
  for (const auto& ip : addrs) EXPECT_TRUE(HostConnect(ip, l.port())) << ip;
  l.Drain();
  std::vector<std::pair<std::string, int>> targets = {{"127.0.0.1", server().port()},
                                                      {"127.0.0.1", l.port()}};
  for (const auto& ip : addrs) targets.push_back({ip, l.port()});
  for (const auto& a : ConnectFromInside(targets)) {
    EXPECT_EQ(a.verdict, "FAILED") << a.host << ":" << a.port;
    // 127.0.0.1 is the sandbox's own loopback, where nothing listens.
    EXPECT_EQ(a.err, a.host == "127.0.0.1" ? ECONNREFUSED : ENETUNREACH) << a.host << ":" << a.port;
  }
  EXPECT_EQ(l.Drain(), 0) << "a connection from the sandbox reached the host listener";
  if (OnVm()) {
    const pid_t qemu = hutch::testing::vm::QemuPid(server(), sandbox());
    ASSERT_TRUE(hutch::testing::vm::IsQemu(qemu));
    const std::string proc = "/proc/" + std::to_string(qemu);
    EXPECT_NE(HostSh("readlink " + proc + "/ns/net"), HostSh("readlink /proc/self/ns/net"))
        << "QEMU shares the host's network namespace";
    // Its namespace's interfaces: lo alone (and down: nothing configured it).
    EXPECT_EQ(HostSh("tail -n +3 " + proc + "/net/dev | cut -d: -f1 | tr -d ' '"), "lo\n");
    EXPECT_EQ(HostSh("tail -n +2 " + proc + "/net/route | wc -l"), "0\n");
  }
}

TEST_F(Network, LinkLocalAndMetadataAddressAreUnreachable) {
  for (const auto& a : ConnectFromInside({{"169.254.169.254", 80},
                                          {"169.254.0.1", 80},
                                          {"10.0.2.2", 80},
                                          {"fe80::1", 80},
                                          {"2001:db8::1", 80}})) {
    EXPECT_EQ(a.verdict, "FAILED") << a.host;
    EXPECT_TRUE(a.err == ENETUNREACH || a.err == EINVAL || a.err == EADDRNOTAVAIL)
        << a.host << ": errno " << a.err;
  }
}
