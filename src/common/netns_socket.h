// Sockets created inside another network namespace. A socket belongs to
// the namespace of the thread that created it, for its whole life; so a
// short-lived thread enters the namespace (setns(2) changes only the
// calling thread's), creates the socket and exits. hutchd's own threads
// never leave the host's namespace.
#pragma once

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch {

// A non-blocking, close-on-exec TCP/IPv4 socket in the network namespace
// `netns_fd` names (an fd of /proc/<pid>/ns/net or similar), made there by
// RunInNetns (netns_thread.h).
Result<UniqueFd> TcpSocketInNetns(int netns_fd);

}  // namespace hutch
