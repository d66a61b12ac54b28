#include "common/netns_socket.h"

#include <sched.h>
#include <sys/socket.h>

#include <thread>

namespace hutch {

Result<UniqueFd> SocketInNetns(int netns_fd, int domain, int type, int protocol) {
  int fd = -1;
  int err = 0;
  const char* step = "";
  // The thread lives for two syscalls; joining it blocks the caller for
  // about as long as creating a thread takes (tens of microseconds).
  std::thread t([&] {
    if (setns(netns_fd, CLONE_NEWNET) != 0) {
      err = errno;
      step = "setns(CLONE_NEWNET)";
      return;
    }
    fd = socket(domain, type, protocol);
    if (fd < 0) {
      err = errno;
      step = "socket";
    }
  });
  t.join();
  if (fd < 0) return ErrnoError(std::string("socket in sandbox network namespace: ") + step, err);
  return UniqueFd(fd);
}

Result<UniqueFd> TcpSocketInNetns(int netns_fd) {
  return SocketInNetns(netns_fd, AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

}  // namespace hutch
