// Sockets created inside another network namespace. A socket belongs to
// the namespace of the thread that created it, for its whole life; so a
// short-lived thread enters the namespace (common/netns_thread), creates
// the socket and exits. hutchd's own threads never leave the host's
// namespace.
#pragma once

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch {

// socket(domain, type, protocol) in the network namespace `netns_fd` names
// (an fd of /proc/<pid>/ns/net or a bind mount of one). Needs
// CAP_SYS_ADMIN over that namespace's owning user namespace.
Result<UniqueFd> SocketInNetns(int netns_fd, int domain, int type, int protocol);

// A non-blocking, close-on-exec TCP/IPv4 socket there.
Result<UniqueFd> TcpSocketInNetns(int netns_fd);

}  // namespace hutch
