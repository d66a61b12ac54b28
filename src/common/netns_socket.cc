#include "common/netns_socket.h"

#include <sched.h>
#include <sys/socket.h>

#include <thread>

namespace hutch {

Result<UniqueFd> TcpSocketInNetns(int netns_fd) {
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
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      step = "socket";
    }
  });
  t.join();
  if (fd < 0) return ErrnoError(std::string("socket in sandbox network namespace: ") + step, err);
  return UniqueFd(fd);
}

}  // namespace hutch
