// The agent's transport inside a VM: one virtio-serial port whose host end
// is a unix socket QEMU serves (the vm driver). There is no accept(): the
// port is one byte pipe, and whether hutchd is at the other end shows only
// in poll(2): POLLHUP while the host side is disconnected, and read()
// returns 0 (EOF) at once when it goes away. So the agent treats the port
// as a connection that comes and goes: while the host is away it looks
// again every kSerialRetry; once the host is there it greets it with the
// hello (which hutchd waits for first, exactly as on a socket); when the
// host disconnects (hutchd restarts) the connection is swept like any other
// and the port reopened, so the next hutchd finds a fresh hello. Whatever
// the guest sends while nobody is connected QEMU drops, and closing the
// port discards what the old host sent, so a new connection starts on a
// frame boundary on both sides.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/agent.h"
#include "agent/log.h"

namespace hutch::agent {

namespace {
// Under TCG a guest wake-up costs little; 20 ms bounds the delay a
// reconnecting hutchd sees before the hello.
constexpr auto kSerialRetry = std::chrono::milliseconds(20);
}  // namespace

void Agent::OpenSerial(Clock::time_point now) {
  if (serial_conn_ != 0 || now < serial_retry_at_) return;
  serial_retry_at_ = now + kSerialRetry;
  UniqueFd fd(open(serial_path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    // EBUSY: the previous open is not released yet; ENOENT: no device.
    if (errno != EBUSY) Log("open " + serial_path_ + ": " + std::strerror(errno));
    return;
  }
  pollfd p{fd.get(), POLLIN, 0};
  if (poll(&p, 1, 0) < 0 || (p.revents & POLLHUP)) return;  // host not connected yet: close, retry
  serial_conn_ = AddConnection(std::move(fd));
}

}  // namespace hutch::agent
