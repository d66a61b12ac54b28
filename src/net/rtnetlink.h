// rtnetlink (netlink(7), rtnetlink(7)) as hutchd speaks it: a
// NETLINK_ROUTE socket bound to one network namespace, requests built
// attribute by attribute, each sent alone and acknowledged by the kernel
// before the next. This is what replaced `ip` processes on the path that
// makes and removes network slots: a process start costs ≈ 10 ms here,
// the requests themselves take microseconds.
//
// A socket belongs to the namespace of the thread that created it, for its
// whole life: OpenIn creates it from a short-lived thread that entered the
// namespace (as common/netns_socket does), so hutchd's own threads never
// leave the host's. An RtNetlink is used by one thread at a time; calls
// block (the kernel answers at once; a receive timeout keeps a lost answer
// from hanging the caller).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::net {

// One request: netlink header, the family message (ifinfomsg, ifaddrmsg,
// rtmsg…), then attributes, each padded to 4 bytes; nested attributes are
// opened with Begin and closed with End.
class RtRequest {
 public:
  RtRequest(uint16_t type, uint16_t flags, const void* body, size_t len);
  void Attr(uint16_t type, const void* data, size_t len);
  void AttrU32(uint16_t type, uint32_t v) { Attr(type, &v, sizeof(v)); }
  void AttrString(uint16_t type, const std::string& s) { Attr(type, s.c_str(), s.size() + 1); }
  // Starts a nested attribute; returns the token End needs.
  size_t Begin(uint16_t type);
  // Appends raw bytes inside the current nest (veth's peer ifinfomsg).
  void Raw(const void* data, size_t len) { Append(data, len); }
  void End(size_t token);

  // The finished message, numbered `seq`.
  const std::vector<char>& Finish(uint32_t seq);

 private:
  void Append(const void* p, size_t len);
  std::vector<char> buf_;
};

class RtNetlink {
 public:
  // A socket in the calling thread's network namespace.
  static Result<RtNetlink> Open();
  // A socket in the namespace `netns_fd` names (needs CAP_SYS_ADMIN there).
  static Result<RtNetlink> OpenIn(int netns_fd);

  // Sends `r` and waits for its acknowledgement (an NLMSG_ERROR whose error
  // is 0 on success, -errno otherwise); `what` names the request in errors.
  Status Transact(RtRequest& r, const std::string& what);
  // The index of interface `name` in the socket's namespace (RTM_GETLINK).
  Result<int> LinkIndex(const std::string& name);

  // Requests for one interface, by index.
  Status SetUp(int ifindex, const std::string& what);
  Status AddAddress(int ifindex, uint32_t address, int prefix, const std::string& what);
  // Removes an interface (RTM_DELLINK); ENODEV when there is none.
  Status DeleteLink(const std::string& name);

 private:
  explicit RtNetlink(UniqueFd fd);
  Result<std::vector<char>> Exchange(RtRequest& r, const std::string& what, bool want_reply);

  UniqueFd fd_;
  uint32_t seq_ = 0;
};

}  // namespace hutch::net
