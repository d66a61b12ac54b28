// Work inside another network namespace. Sockets, devices and
// /proc/sys/net files belong to the namespace of the thread that makes or
// opens them, and setns(2) changes only the calling thread's: so a
// short-lived thread enters the namespace, does the work and ends, and
// hutchd's own threads never leave the host's. Joining it blocks the
// caller for about as long as creating a thread takes (tens of
// microseconds) plus the work.
#pragma once

#include <functional>

#include "common/result.h"

namespace hutch {

// Runs `body` on such a thread inside the namespace `netns_fd` names (an
// fd of /proc/<pid>/ns/net or a bind mount of one; -1: a new, empty
// namespace of the thread's own) and waits for it. Fails only when the
// thread cannot enter (CAP_SYS_ADMIN over the namespace's user namespace
// is needed); `body` reports its own errors through what it captures.
Status RunInNetns(int netns_fd, const std::function<void()>& body);

}  // namespace hutch
