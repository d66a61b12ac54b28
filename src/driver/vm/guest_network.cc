#include "driver/vm/guest_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/netns_thread.h"
#include "common/subprocess.h"

namespace hutch::vm {

namespace {

// The tap's own MAC (locally administered): fixed, because a restored
// guest's ARP cache still holds the one its boot snapshot saw.
constexpr unsigned char kTapMac[6] = {0x02, 0x00, 0xc0, 0x00, 0x00, 0x01};
constexpr const char* kGuestNetmask = "255.255.255.252";

void SetAddr(sockaddr* sa, const char* ip) {
  auto* in = reinterpret_cast<sockaddr_in*>(sa);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &in->sin_addr);
}

// Writes a sysctl of the calling thread's network namespace (/proc/sys/net
// follows the opener's namespace). A missing file (IPv6 compiled out) is
// nothing to turn off.
int WriteSysctl(const std::string& path, bool missing_ok) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return missing_ok && errno == ENOENT ? 0 : errno;
  const int err = write(fd, "1", 1) == 1 ? 0 : errno;
  close(fd);
  return err;
}

}  // namespace

Result<UniqueFd> OpenGuestTap(const std::string& netns_path) {
  UniqueFd ns;
  if (!netns_path.empty()) {
    ns = UniqueFd(open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return ErrnoError("open network namespace " + netns_path);
  }
  int tap = -1;
  int err = 0;
  const char* step = "";
  // The device and the sysctls belong to the namespace they are made in
  // (common/netns_thread.h); without a path, to a new one of their own.
  auto entered = RunInNetns(ns ? ns.get() : -1, [&] {
    auto fail = [&](const char* what) {
      err = errno;
      step = what;
    };
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) return fail("open /dev/net/tun");
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, kTapName, IFNAMSIZ - 1);
    // The vnet header lets QEMU pass checksum and segmentation offloads.
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
      fail("TUNSETIFF");
      close(fd);
      return;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
      fail("socket");
      close(fd);
      return;
    }
    bool ok = true;
    auto ctl = [&](unsigned long req, const char* what) {
      if (ok && ioctl(s, req, &ifr) != 0) {
        fail(what);
        ok = false;
      }
    };
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    std::memcpy(ifr.ifr_hwaddr.sa_data, kTapMac, sizeof kTapMac);
    ctl(SIOCSIFHWADDR, "set tap MAC");
    SetAddr(&ifr.ifr_addr, kGuestGateway);
    ctl(SIOCSIFADDR, "set tap address");
    SetAddr(&ifr.ifr_netmask, kGuestNetmask);
    ctl(SIOCSIFNETMASK, "set tap netmask");
    ctl(SIOCGIFFLAGS, "get tap flags");
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    ctl(SIOCSIFFLAGS, "bring tap up");
    close(s);
    if (ok) {
      if (int e = WriteSysctl(std::string("/proc/sys/net/ipv6/conf/") + kTapName + "/disable_ipv6",
                              true)) {
        errno = e;
        fail("disable IPv6 on the tap");
        ok = false;
      }
    }
    // Forwarding only where the guest has somewhere to go: the slot's
    // namespace, whose rules (ApplyGuestRules) are in place already.
    if (ok && ns) {
      if (int e = WriteSysctl("/proc/sys/net/ipv4/ip_forward", false)) {
        errno = e;
        fail("turn on forwarding");
        ok = false;
      }
    }
    if (!ok) {
      close(fd);
      return;
    }
    tap = fd;
  });
  if (!entered.ok()) return entered.error().Context("guest tap device");
  if (tap < 0) return ErrnoError(std::string("guest tap device: ") + step, err);
  return UniqueFd(tap);
}

std::string GuestRules(const std::string& dns_server) {
  const std::string tap = std::string("\"") + kTapName + "\"";
  // inet: one table sees IPv4 and IPv6 alike, so the forward chain's drop
  // policy also ends whatever IPv6 the guest sends.
  return std::string("table inet hutch_guest {\n") +
         "  chain prerouting {\n"
         "    type nat hook prerouting priority dstnat; policy accept;\n"
         "    iifname " +
         tap + " ip daddr " + kGuestGateway + " meta l4proto { tcp, udp } th dport 53 dnat ip to " +
         dns_server + "\n" +
         "  }\n"
         "  chain postrouting {\n"
         "    type nat hook postrouting priority srcnat; policy accept;\n"
         "    oifname \"eth0\" masquerade\n"
         "  }\n"
         "  chain forward {\n"
         "    type filter hook forward priority filter; policy drop;\n"
         "    ct state established,related accept\n"
         // The slot namespace has a conntrack table of its own (NAT needs
         // it): bounded here; the operator's per-sandbox limits hold on the
         // host's chains, where the guest's traffic arrives as the slot's.
         "    iifname " +
         tap + " ct state new ct count over 16384 reject with icmpx type admin-prohibited\n" +
         "    iifname " + tap + " oifname \"eth0\" ip saddr " + kGuestAddress + " accept\n" +
         "  }\n"
         "  chain input {\n"
         "    type filter hook input priority filter; policy accept;\n"
         "    iifname " +
         tap + " ct state established,related accept\n" + "    iifname " + tap + " drop\n" +
         "  }\n"
         "}\n";
}

asio::awaitable<Status> ApplyGuestRules(const std::string& netns_path,
                                        const std::string& dns_server) {
  const std::string nsenter = FindTool("nsenter"), nft = FindTool("nft");
  if (nsenter.empty() || nft.empty())
    co_return MakeError(Code::kUnavailable,
                        "vm networking needs nsenter (util-linux) and nft (nftables)");
  const std::string script = GuestRules(dns_server);
  const std::vector<std::string> argv = {nsenter, "--net=" + netns_path, nft, "-f", "-"};
  auto st = co_await RunToolWithInput(argv, &script, std::chrono::seconds(20));
  if (!st.ok()) co_return st.error().Context("vm guest network rules");
  co_return Status{};
}

}  // namespace hutch::vm
