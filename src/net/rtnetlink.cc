#include "net/rtnetlink.h"

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/netns_socket.h"

namespace hutch::net {

namespace {

// The kernel answers at once; never hang the calling thread on a lost
// answer.
void SetReceiveTimeout(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

UniqueFd NewSocket() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (fd) SetReceiveTimeout(fd.get());
  return fd;
}

}  // namespace

RtRequest::RtRequest(uint16_t type, uint16_t flags, const void* body, size_t len) {
  buf_.resize(NLMSG_HDRLEN, 0);
  Append(body, len);
  auto* h = reinterpret_cast<nlmsghdr*>(buf_.data());
  h->nlmsg_type = type;
  h->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
}

void RtRequest::Append(const void* p, size_t len) {
  const size_t at = buf_.size();
  buf_.resize(at + NLMSG_ALIGN(len), 0);
  if (len) std::memcpy(buf_.data() + at, p, len);
}

void RtRequest::Attr(uint16_t type, const void* data, size_t len) {
  rtattr a{};
  a.rta_type = type;
  a.rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
  Append(&a, sizeof(a));
  Append(data, len);
}

size_t RtRequest::Begin(uint16_t type) {
  const size_t at = buf_.size();
  Attr(type, nullptr, 0);
  return at;
}

void RtRequest::End(size_t token) {
  // The nest's length covers everything appended since Begin.
  rtattr a;
  std::memcpy(&a, buf_.data() + token, sizeof(a));
  a.rta_len = static_cast<uint16_t>(buf_.size() - token);
  std::memcpy(buf_.data() + token, &a, sizeof(a));
}

const std::vector<char>& RtRequest::Finish(uint32_t seq) {
  auto* h = reinterpret_cast<nlmsghdr*>(buf_.data());
  h->nlmsg_len = static_cast<uint32_t>(buf_.size());
  h->nlmsg_seq = seq;
  return buf_;
}

RtNetlink::RtNetlink(UniqueFd fd) : fd_(std::move(fd)) {}

Result<RtNetlink> RtNetlink::Open() {
  UniqueFd fd = NewSocket();
  if (!fd) return ErrnoError("socket(NETLINK_ROUTE)");
  return RtNetlink(std::move(fd));
}

Result<RtNetlink> RtNetlink::OpenIn(int netns_fd) {
  auto fd = SocketInNetns(netns_fd, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (!fd.ok()) return fd.error().Context("netlink");
  SetReceiveTimeout(fd->get());
  return RtNetlink(std::move(fd).value());
}

Result<std::vector<char>> RtNetlink::Exchange(RtRequest& r, const std::string& what,
                                              bool want_reply) {
  const uint32_t seq = ++seq_;
  const auto& b = r.Finish(seq);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_.get(), b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) < 0)
    return ErrnoError("netlink send (" + what + ")");
  std::vector<char> reply_msg;
  alignas(nlmsghdr) char reply[16384];
  for (;;) {
    ssize_t n = recv(fd_.get(), reply, sizeof(reply), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("netlink receive (" + what + ")");
    }
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq) continue;  // an answer to an earlier, timed-out request
      if (h->nlmsg_type != NLMSG_ERROR) {
        // A GET's answer comes before its acknowledgement.
        if (want_reply && reply_msg.empty())
          reply_msg.assign(reinterpret_cast<char*>(h), reinterpret_cast<char*>(h) + h->nlmsg_len);
        continue;
      }
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (e->error != 0) return ErrnoError(what, -e->error);
      return reply_msg;
    }
  }
}

Status RtNetlink::Transact(RtRequest& r, const std::string& what) {
  auto rep = Exchange(r, what, false);
  if (!rep.ok()) return rep.error();
  return Status{};
}

Result<int> RtNetlink::LinkIndex(const std::string& name) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  RtRequest r(RTM_GETLINK, 0, &m, sizeof(m));
  r.AttrString(IFLA_IFNAME, name);
  // Only the index is wanted: skip the statistics in the answer.
  r.AttrU32(IFLA_EXT_MASK, 0);
  auto rep = Exchange(r, "find interface " + name, true);
  if (!rep.ok()) return rep.error();
  const auto& b = *rep;
  if (b.size() < NLMSG_LENGTH(sizeof(ifinfomsg)))
    return MakeError(Code::kInternal, "find interface " + name + ": no answer");
  ifinfomsg got;
  std::memcpy(&got, b.data() + NLMSG_HDRLEN, sizeof(got));
  return got.ifi_index;
}

Status RtNetlink::SetUp(int ifindex, const std::string& what) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  m.ifi_index = ifindex;
  m.ifi_flags = IFF_UP;
  m.ifi_change = IFF_UP;
  RtRequest r(RTM_NEWLINK, 0, &m, sizeof(m));
  return Transact(r, what);
}

Status RtNetlink::AddAddress(int ifindex, uint32_t address, int prefix, const std::string& what) {
  ifaddrmsg a{};
  a.ifa_family = AF_INET;
  a.ifa_prefixlen = static_cast<unsigned char>(prefix);
  a.ifa_scope = RT_SCOPE_UNIVERSE;
  a.ifa_index = static_cast<uint32_t>(ifindex);
  const uint32_t addr = htonl(address);
  RtRequest r(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &a, sizeof(a));
  r.Attr(IFA_LOCAL, &addr, sizeof(addr));
  r.Attr(IFA_ADDRESS, &addr, sizeof(addr));
  return Transact(r, what);
}

Status RtNetlink::DeleteLink(const std::string& name) {
  ifinfomsg m{};
  m.ifi_family = AF_UNSPEC;
  RtRequest r(RTM_DELLINK, 0, &m, sizeof(m));
  r.AttrString(IFLA_IFNAME, name);
  return Transact(r, "link del " + name);
}

}  // namespace hutch::net
