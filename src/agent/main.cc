// hutch-agent: PID 1 of a sandbox. Serves docs/wire.md on connections
// accepted from the listening socket inherited as fd 3 (jail driver), or,
// with `--serial PATH`, over a virtio-serial port (vm driver; see
// serial_port.cc).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <string>

#include "agent/agent.h"
#include "agent/log.h"

namespace {
constexpr int kListenFd = 3;
// The writable layer's directory (O_PATH), held for the host (snapshots,
// fork); the agent never uses it. Absent when run outside a jail.
constexpr int kScratchFd = 4;
}  // namespace

int main(int argc, char** argv) {
  try {
    // Keep 0-2 occupied so no pipe or socket we create lands there: the
    // child's dup2 onto 0-2 must always move an fd, clearing O_CLOEXEC.
    // (A placeholder stdio fd is meant to stay open in children: no O_CLOEXEC.)
    for (int fd = 0; fd < 3; ++fd)
      // NOLINTNEXTLINE(android-cloexec-open)
      if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);  // lands on fd: lowest free
    // Commands must not inherit the layer fd, and nothing in the sandbox
    // may open it through /proc/1/fd: non-dumpable makes /proc/1/fd (and
    // the host paths it shows) need CAP_SYS_PTRACE, which the sandbox's
    // root does not have.
    if (fcntl(kScratchFd, F_GETFD) >= 0) fcntl(kScratchFd, F_SETFD, FD_CLOEXEC);
    prctl(PR_SET_DUMPABLE, 0);
    // Orphaned grandchildren are reparented to us even when we are not PID 1
    // (tests, debugging), so reaping works the same way.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    // Writes to a closed pipe or socket must fail with EPIPE, not kill us.
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    std::unique_ptr<hutch::agent::Agent> agent;
    if (argc == 3 && std::string(argv[1]) == "--serial") {
      agent = std::make_unique<hutch::agent::Agent>(hutch::agent::Agent::SerialPort{argv[2]});
    } else {
      struct stat st {};
      if (fstat(kListenFd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        hutch::agent::Log("fd 3 is not the listening socket");
        return 2;
      }
      agent = std::make_unique<hutch::agent::Agent>(hutch::UniqueFd(kListenFd));
    }
    if (auto s = agent->Init(); !s.ok()) {
      hutch::agent::Log("init: " + s.error().message);
      return 1;
    }
    agent->Run();
  } catch (const std::exception& e) {
    hutch::agent::Log(std::string("fatal: ") + e.what());
  } catch (...) {
    hutch::agent::Log("fatal: unknown exception");
  }
  return 1;
}
