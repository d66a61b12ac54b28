#include "common/netns_thread.h"

#include <sched.h>

#include <cerrno>
#include <thread>

namespace hutch {

Status RunInNetns(int netns_fd, const std::function<void()>& body) {
  int err = 0;
  std::thread t([&] {
    if ((netns_fd >= 0 ? setns(netns_fd, CLONE_NEWNET) : unshare(CLONE_NEWNET)) != 0) {
      err = errno;
      return;
    }
    body();
  });
  t.join();
  if (err != 0)
    return ErrnoError(netns_fd >= 0 ? "enter network namespace" : "make a network namespace", err);
  return Status{};
}

}  // namespace hutch
