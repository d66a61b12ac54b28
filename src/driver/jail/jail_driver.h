// The jail driver: each sandbox is a process tree in its own namespaces,
// cgroups and seccomp filter, with hutch-agent as PID 1 (see jail_spawn.h).
#pragma once

#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "driver/driver.h"
#include "driver/jail/cgroup.h"
#include "driver/jail/disk_pool.h"
#include "driver/jail/seccomp_policy.h"

namespace hutch::jail {

struct JailDriverOptions {
  std::string state_dir;     // sandbox dirs go to <state_dir>/sandboxes
  std::string agent_path;    // hutch-agent binary on the host
  std::string instance_tag;  // prefix of this server's cgroup names
  uint32_t uid_base = 1000000;
  // Sandbox disk images kept formatted ahead, per size in recent use
  // (DiskPool); 0: each made at its create.
  int warm_disks = 4;
  // The disk size kept ready from start (sandboxes' default disk_mb; 0:
  // none until a create asks for a size), and how many of it at least
  // (hutchd --warm-disks). Each costs a loop device and a mounted, empty
  // ext4 (its superblock and a kernel thread) and ~1 MB of the state dir.
  int64_t warm_disk_mb = 0;
  int warm_default_disks = 32;
};

class JailDriver : public Driver {
 public:
  static Result<std::unique_ptr<JailDriver>> Make(const JailDriverOptions& opts);
  std::string name() const override { return "jail"; }
  asio::awaitable<Result<std::shared_ptr<Instance>>> Create(const InstanceSpec& spec) override;
  asio::awaitable<Result<std::shared_ptr<Instance>>> Adopt(const InstanceSpec& spec,
                                                           const std::string& facts,
                                                           bool paused) override;
  int ReconcileAtStart(const std::set<std::string>& keep) override;
  int cgroup_version() const { return cgroups_->Version(); }
  DriverPools Pools() override { return {disks_.ready(), disks_.wanted()}; }
  // Starts making the pooled disks of opts.warm_disk_mb on `ex` (the
  // server's I/O thread), so the first creates find them ready.
  void WarmDisks(asio::any_io_executor ex) {
    disks_.Warm(std::move(ex), opts_.warm_disk_mb, opts_.warm_default_disks);
  }

 private:
  JailDriver(JailDriverOptions opts, SeccompPolicy seccomp, std::unique_ptr<CgroupManager> cg,
             UniqueFd memfd)
      : opts_(std::move(opts)),
        seccomp_(std::move(seccomp)),
        cgroups_(std::move(cg)),
        agent_memfd_(std::move(memfd)),
        disks_(opts_.state_dir + "/disk-pool", opts_.warm_disks, *kernel_,
               DiskPrep{/*prepare=*/true, opts_.uid_base}) {}
  // Whether the agent got its OOM shield (-999); logs once when not.
  void CheckOomShield(pid_t agent);
  JailDriverOptions opts_;
  SeccompPolicy seccomp_;
  std::unique_ptr<CgroupManager> cgroups_;
  UniqueFd agent_memfd_;
  // The blocking kernel work of a create and a delete, off the I/O thread:
  // a cgroup v1 attach waits for an RCU grace period, loop attach writes
  // the image back, unlinking a used image discards its blocks on hosts
  // mounted with `discard`, an ext4 shutdown flushes. Two threads: these
  // mostly sleep in the kernel, and a create need not queue behind a
  // delete. Shared with the instances (a delete runs on it). Declared
  // before disks_, which uses it.
  std::shared_ptr<BlockingWorker> kernel_ = std::make_shared<BlockingWorker>(8);
  // The threads that clone sandboxes: each sleeps in clone (vfork) while
  // its child sets up, so as many creates as this can be in setup at once.
  std::unique_ptr<BlockingWorker> spawner_ = std::make_unique<BlockingWorker>(32);
  DiskPool disks_;
  bool oom_shield_warned_ = false;
};

}  // namespace hutch::jail
