// One vm sandbox: a QEMU process (its pidfd and cgroup), the sandbox
// directory it runs in, and the agent connection over its virtio-serial
// socket. Lives on the I/O thread.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "driver/driver.h"
#include "driver/jail/cgroup.h"

namespace hutch::vm {

struct VmProcessFacts {
  pid_t pid = -1;
  uint64_t start_time = 0;  // with pid: one process for the host's lifetime
  bool our_child = true;    // false once adopted (reaped by the host's init)
};

class VmInstance : public Instance, public std::enable_shared_from_this<VmInstance> {
 public:
  VmInstance(std::string id, std::string dir, std::string pidfile, VmProcessFacts proc,
             UniqueFd pidfd, std::unique_ptr<jail::Cgroup> cg, int64_t disk_mb);
  ~VmInstance() override;

  std::shared_ptr<AgentConnection> agent() override { return agent_; }
  // QEMU's own (host cgroup) plus the guest's, as the agent last reported.
  uint64_t OomKills() override { return (cgroup_ ? cgroup_->OomKills() : 0) + guest_oom_kills_; }
  void NoteAgentOomKills(uint64_t n) override { guest_oom_kills_ = std::max(guest_oom_kills_, n); }
  Result<InstanceStats> Stats() override;
  // QMP stop / cont: the vCPUs stop where they are; guest RAM and device
  // state stay in QEMU. The agent's socket stays connected (QEMU holds it).
  Status Pause() override;
  Status Resume() override;
  asio::awaitable<Status> CaptureLayer(const std::string& dst) override;
  // The network slot's namespace (guest_network.h); kNotSupported for a
  // VM without a network (no NIC: nothing to reach but its own loopback).
  Result<UniqueFd> NetNamespace() override;
  std::string PortAddress() const override;
  asio::awaitable<void> Destroy() override;
  std::string AdoptionFacts() const override;
  std::string boot() const override { return boot_; }
  // vm_fork.cc: stop, migrate the whole machine to a file, copy the disk
  // overlay, continue (see vm_fork.h).
  asio::awaitable<Result<std::shared_ptr<MachineImage>>> CaptureMachine() override;

  // Ends QEMU and waits for it, leaving its files (a boot snapshot's build
  // takes its RAM file and disk out before Destroy removes the rest).
  asio::awaitable<void> KillQemu();
  void set_boot(std::string b) { boot_ = std::move(b); }
  // Where fork images are made (<vm dir>/forks).
  void set_forks_dir(std::string d) { forks_dir_ = std::move(d); }
  // The slot namespace its tap is in ("" without a network).
  void set_netns(std::string path) { netns_path_ = std::move(path); }
  const std::string& dir() const { return dir_; }

  // Watches QEMU's pidfd: QEMU exiting (guest powered off or panicked,
  // killed) reports on_lost.
  void StartWatch(asio::any_io_executor ex);
  void SetAgent(std::shared_ptr<AgentConnection> conn);
  bool exited() const;
  std::string qmp_path() const { return dir_ + "/qmp.sock"; }
  // The last lines of the guest console and QEMU's log, for errors.
  std::string Diagnostics() const;
  void set_paused(bool p) { paused_ = p; }

 private:
  void DestroyNow();
  std::string id_, dir_, pidfile_;
  VmProcessFacts proc_;
  UniqueFd pidfd_;
  std::unique_ptr<jail::Cgroup> cgroup_;
  int64_t disk_mb_;
  std::shared_ptr<AgentConnection> agent_;
  uint64_t guest_oom_kills_ = 0;
  bool paused_ = false;
  bool capturing_ = false;  // a fork's capture has the VM stopped
  std::string boot_, forks_dir_, netns_path_;
  bool destroying_ = false;
  bool destroyed_ = false;
  bool reaped_ = false;
};

}  // namespace hutch::vm
