// Starting one sandbox's process tree: the isolation pipeline.
//
// The parent (hutchd) prepares every path and option string, then clone()s a
// child into fresh pid, mount, net, ipc and uts namespaces — sharing
// hutchd's memory until its exec (CLONE_VM | CLONE_VFORK, from a spawner
// thread that sleeps meanwhile), so a spawn copies nothing. While still real
// root, the child builds the sandbox's root (an overlay over the template
// whose writable layer is the sandbox's own ext4 disk, mounted ahead by hutchd and moved in, /proc,
// a minimal /dev, masked /proc paths), binds the agent's listening socket at a host path, pivots
// into the new root and only then enters a cgroup namespace and a new user namespace whose uid 0
// maps to an unprivileged host range. Because every mount was made by the host's root before the
// user namespace existed, the sandbox's root cannot unmount or change any of them. Finally:
// no_new_privs, a reduced capability bounding set, no core dumps, the seccomp filter, and exec of
// hutch-agent from a sealed memfd (so /proc/1/exe inside is not a writable host file).
//
// Between clone() and exec() the child uses raw syscalls only; each failure
// is reported to the parent as {step, errno} over a close-on-exec socket.
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/blocking_worker.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "driver/jail/seccomp_policy.h"

namespace asio = boost::asio;

namespace hutch::jail {

// How long a child in setup waits for its parent's next word before it
// gives up (and how long SpawnJail waits for the child to start).
constexpr std::chrono::seconds kChildPatience{60};

// A host directory bound into the sandbox (a volume).
struct JailBind {
  std::string host_dir;  // already mounted on the host
  std::string path;      // absolute and normalized inside the sandbox
  bool read_only = false;
};

struct JailConfig {
  std::string sandbox_dir;  // <state>/sandboxes/<id>, created by the caller
  std::string lower_dir;    // template rootfs (read-only lower layer)
  // Read-only layers stacked above the template, topmost first (snapshot
  // layers, the sandbox's identity files).
  std::vector<std::string> extra_lowers;
  // Bound in this order (parents before children), after the overlay.
  std::vector<JailBind> binds;
  std::string agent_socket;  // host path of the agent's listening socket
  std::string log_path;      // agent's stdout/stderr
  std::string hostname = "sandbox";
  uint32_t uid_base = 0;  // host uid/gid that sandbox uid/gid 0 maps to
  uint32_t uid_count = 65536;
  // The sandbox's writable layer: its ext4 disk as a detached mount with
  // upper/ and work/ (disk_pool's PrepareWritableLayer), which the caller
  // keeps open until the child reported its exec (then the child's mount
  // namespace holds it).
  int disk_mount_fd = -1;
  const SeccompPolicy* seccomp = nullptr;
  int agent_memfd = -1;  // sealed memfd holding the hutch-agent binary
  // A prepared network namespace to join (the sandbox has a network);
  // -1: a fresh one with loopback only.
  int netns_fd = -1;
  // Cgroup::OpenSelfAttach's files, kept open by the caller until the
  // child exec'd: the child moves itself into its cgroups through them.
  // Empty: the caller moves it (AddProcess) and releases it at the gate.
  std::vector<int> cgroup_tasks_fds;
};

// A child that has been cloned and is waiting for the parent's steps.
class JailChild {
 public:
  pid_t pid() const { return pid_; }
  int sync_fd() const { return sync_.get(); }
  UniqueFd TakePidfd() { return std::move(pidfd_); }

  // The child builds its root as soon as it runs. Without self-attach
  // (JailConfig::cgroup_tasks_fds empty) the caller puts pid() into its
  // cgroups meanwhile, then:
  // Step 2: reads the child's report that its root is built (it then waits
  // to be in its cgroups); an Error carries the failed step and errno.
  // Blocking read: call after sync_fd() polled readable.
  Status ReadCgroupGate();
  // Step 2b (once pid() is in its cgroups): let it enter its cgroup and
  // user namespaces.
  Status ReleaseIntoCgroupNamespace();
  // Step 3: reads the child's next report. Returns true when the child
  // asks for its uid/gid maps; an Error carries the failed step and errno.
  // Blocking read: call after sync_fd() polled readable.
  Result<bool> ReadReport();
  // Step 4: writes /proc/<pid>/{uid,gid}_map and lets the child go on.
  Status MapIdsAndRelease(uint32_t uid_base, uint32_t count);
  // Step 5: after sync_fd() is readable again: EOF means the agent was
  // exec'd; anything else is the failed step.
  Status ReadExecResult();
  // Kills and reaps the child (on any failure path). For an adopted
  // process (not our child) this only forgets it: the owner kills it
  // through its pidfd, and the host's init reaps it.
  void KillAndReap();
  // A jail process an earlier hutchd started (found again after a restart).
  static JailChild Adopted(pid_t pid, UniqueFd pidfd);
  bool adopted() const { return adopted_; }

 private:
  friend asio::awaitable<Result<JailChild>> SpawnJail(JailConfig cfg, BlockingWorker& spawner);
  // A report that is not a failure (its step), or the failure.
  Result<uint32_t> ReadStep();
  pid_t pid_ = -1;
  bool adopted_ = false;
  UniqueFd sync_;
  UniqueFd pidfd_;
  // What the child reads until its exec (the config, its plan, its stack).
  std::shared_ptr<void> state_;
};

// Clones the child on one of `spawner`'s threads, which stays in clone
// until the child has exec'd or died: give it threads enough for the
// creates that may be in setup at once. Resumes once the child runs (and
// builds the sandbox's root).
asio::awaitable<Result<JailChild>> SpawnJail(JailConfig cfg, BlockingWorker& spawner);

// Names of the child's steps, for error messages.
const char* JailStepName(uint32_t step);

}  // namespace hutch::jail
