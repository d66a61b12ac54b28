#include "common/netns_socket.h"

#include <sys/socket.h>

#include <cerrno>

#include "common/netns_thread.h"

namespace hutch {

Result<UniqueFd> SocketInNetns(int netns_fd, int domain, int type, int protocol) {
  int fd = -1, err = 0;
  auto entered = RunInNetns(netns_fd, [&] {
    fd = socket(domain, type, protocol);
    if (fd < 0) err = errno;
  });
  if (!entered.ok()) return entered.error().Context("socket in sandbox network namespace");
  if (fd < 0) return ErrnoError("socket in sandbox network namespace", err);
  return UniqueFd(fd);
}

Result<UniqueFd> TcpSocketInNetns(int netns_fd) {
  return SocketInNetns(netns_fd, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

}  // namespace hutch
