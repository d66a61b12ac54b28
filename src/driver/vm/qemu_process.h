// Starts QEMU confined, in the spirit of Firecracker's jailer:
//
//   - in its own cgroup (memory: guest RAM + QEMU's overhead, pids, CPU
//     quota), joined before QEMU runs a single instruction;
//   - in new mount, IPC and UTS namespaces, and a network namespace with
//     nothing in it (or the sandbox's own, once VMs get a tap device);
//   - as an unprivileged user with no supplementary groups and
//     no_new_privs, its working directory the sandbox's directory — the
//     only place it can write, reached as root before dropping privileges
//     (the state dir above it is 0700 root), so every file QEMU opens is a
//     relative name in there;
//   - in its own session, not hutchd's child in any way that matters: no
//     parent-death signal, so it outlives a hutchd restart and is adopted.
//
// QEMU then installs its own seccomp filter (`-sandbox on`).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::vm {

struct QemuLaunch {
  std::vector<std::string> argv;
  std::string dir;       // the sandbox directory: QEMU's cwd
  std::string log_path;  // QEMU's stdout and stderr
  uid_t uid = 65534;
  gid_t gid = 65534;
  int netns_fd = -1;  // join this network namespace; -1: a new empty one
  // Inherited by QEMU as fds 3, 4, … in this order (a restore's migration
  // stream and its sealed RAM); every other fd of hutchd is closed.
  std::vector<int> pass_fds;
  // Called in the parent between fork and exec: moves the child into its
  // cgroup. An error kills the child.
  std::function<Status(pid_t)> place;
};

struct QemuProcess {
  pid_t pid = -1;
  UniqueFd pidfd;
};

// Forks, confines and execs QEMU; returns once exec succeeded (or with the
// step that failed and its errno).
Result<QemuProcess> StartQemu(const QemuLaunch& l);

}  // namespace hutch::vm
