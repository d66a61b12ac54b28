// Helpers of the vm driver's tests: the QEMU process behind a vm sandbox,
// found by the pid file hutchd keeps (never by process name).
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

#include "tests/support/test_server.h"

namespace hutch::testing::vm {

// The pid the server recorded for sandbox `id`'s QEMU (-1 when none).
inline pid_t QemuPid(const TestServer& s, const std::string& id) {
  std::ifstream in(s.state_dir() + "/state/vm/pids/" + id);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// Whether `pid` still runs QEMU (a pid reused by something else is not it).
inline bool IsQemu(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  in >> comm;
  return comm.rfind("qemu", 0) == 0;
}

// Waits up to `ms` for QEMU `pid` to be gone.
inline bool QemuGone(pid_t pid, int ms = 10000) {
  for (int i = 0; i < ms / 50; ++i) {
    if (!IsQemu(pid)) return true;
    usleep(50 * 1000);
  }
  return !IsQemu(pid);
}

}  // namespace hutch::testing::vm
