#include "net/sandbox_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/netns_thread.h"
#include "common/unique_fd.h"

namespace hutch::net {

namespace {

// One rtnetlink request: header, the family message, then attributes,
// each padded to 4 bytes as netlink(7) requires.
class Request {
 public:
  Request(uint16_t type, uint16_t flags, const void* body, size_t len) {
    buf_.resize(NLMSG_HDRLEN);
    Append(body, len);
    auto* h = header();
    h->nlmsg_type = type;
    h->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
  }
  void Attr(uint16_t type, const void* data, size_t len) {
    rtattr a{};
    a.rta_type = type;
    a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    Append(&a, sizeof(a));
    Append(data, len);
  }
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  std::vector<char>& bytes() {
    header()->nlmsg_len = static_cast<uint32_t>(buf_.size());
    return buf_;
  }

 private:
  void Append(const void* p, size_t len) {
    const size_t at = buf_.size();
    buf_.resize(at + NLMSG_ALIGN(len), 0);
    std::memcpy(buf_.data() + at, p, len);
  }
  std::vector<char> buf_;
};

// Sends one request and reads its acknowledgement (an NLMSG_ERROR whose
// error is 0 on success, -errno otherwise).
Status Transact(int fd, Request& r, uint32_t seq, const char* what) {
  r.header()->nlmsg_seq = seq;
  auto& b = r.bytes();
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0)
    return ErrnoError(std::string("netlink send (") + what + ")");
  alignas(nlmsghdr) char reply[8192];
  for (;;) {
    ssize_t n = recv(fd, reply, sizeof(reply), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(std::string("netlink receive (") + what + ")");
    }
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq || h->nlmsg_type != NLMSG_ERROR) continue;
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (e->error == 0) return Status{};
      return ErrnoError(what, -e->error);
    }
  }
}

Status SetUp(int fd, int ifindex, uint32_t seq, const char* what) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  m.ifi_index = ifindex;
  m.ifi_flags = IFF_UP;
  m.ifi_change = IFF_UP;
  Request r(RTM_NEWLINK, 0, &m, sizeof(m));
  return Transact(fd, r, seq, what);
}

}  // namespace

Status ConfigureSandboxLink(const SandboxLinkConfig& c) {
  UniqueFd ns(open(c.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return ErrnoError("open " + c.netns_path);
  // Inside the namespace: the netlink socket and the two interface
  // indexes (if_nametoindex asks the calling thread's namespace).
  int fd = -1, err = 0;
  unsigned lo = 0, eth = 0;
  const char* step = "";
  auto entered = RunInNetns(ns.get(), [&] {
    lo = if_nametoindex("lo");
    eth = if_nametoindex(c.ifname.c_str());
    if (lo == 0 || eth == 0) {
      err = errno;
      step = "if_nametoindex";
      return;
    }
    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
      err = errno;
      step = "socket(NETLINK_ROUTE)";
    }
  });
  if (!entered.ok()) return entered.error().Context("configure " + c.ifname + " in " + c.netns_path);
  if (fd < 0) return ErrnoError("configure " + c.ifname + " in " + c.netns_path + ": " + step, err);
  UniqueFd nl(fd);
  timeval tv{5, 0};  // the kernel answers at once; never hang hutchd's thread
  setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  auto ctx = [&](Status st) { return st.ok() ? st : st.error().Context("in " + c.netns_path); };
  if (auto st = SetUp(nl.get(), static_cast<int>(lo), 1, "link set lo up"); !st.ok()) return ctx(st);

  ifaddrmsg a{};
  a.ifa_family = AF_INET;
  a.ifa_prefixlen = static_cast<unsigned char>(c.prefix);
  a.ifa_scope = RT_SCOPE_UNIVERSE;
  a.ifa_index = eth;
  const uint32_t addr = htonl(c.address);
  Request ra(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &a, sizeof(a));
  ra.Attr(IFA_LOCAL, &addr, sizeof(addr));
  ra.Attr(IFA_ADDRESS, &addr, sizeof(addr));
  if (auto st = Transact(nl.get(), ra, 2, "addr add"); !st.ok()) return ctx(st);

  if (auto st = SetUp(nl.get(), static_cast<int>(eth), 3, "link set eth0 up"); !st.ok()) return ctx(st);

  rtmsg r{};
  r.rtm_family = AF_INET;
  r.rtm_table = RT_TABLE_MAIN;
  r.rtm_protocol = RTPROT_BOOT;
  r.rtm_scope = RT_SCOPE_UNIVERSE;
  r.rtm_type = RTN_UNICAST;
  const uint32_t gw = htonl(c.gateway);
  const uint32_t oif = eth;
  Request rr(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &r, sizeof(r));
  rr.Attr(RTA_GATEWAY, &gw, sizeof(gw));
  rr.Attr(RTA_OIF, &oif, sizeof(oif));
  if (auto st = Transact(nl.get(), rr, 4, "route add default"); !st.ok()) return ctx(st);
  return Status{};
}

}  // namespace hutch::net
