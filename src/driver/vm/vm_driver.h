// The vm driver: every sandbox is a QEMU virtual machine with its own
// guest kernel (Debian's cloud kernel), hutch-agent as its PID 1 reached
// over a virtio-serial port, the template as a shared read-only disk and a
// copy-on-write disk of its own. KVM where a probe says it works, TCG
// otherwise. docs/vm-driver.md has the design and the threat model.
//
// Files: <state>/vm/{vmlinux,initrd.cpio} (guest_files), <state>/vm/images
// (disk_images), <state>/vm/sandboxes/<id> (one per VM: QEMU's working
// directory, owned by the vm user), <state>/vm/pids/<id> (root-only: the
// QEMU pid and start time, for reconcile; never inside the directory QEMU
// can write), <state>/vm/snapshots/<key> (boot snapshots, boot_snapshots.h)
// and <state>/vm/forks/<id> (a fork in progress, vm_fork.h).
//
// A create boots once per boot key (template image, memory, vCPUs, disk
// size, guest identity) into a boot snapshot and restores every sandbox of
// that key from it (vm_restore.cc); a fork restores its children from the
// running source's saved machine.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "driver/driver.h"
#include "driver/jail/cgroup.h"
#include "driver/vm/accel_probe.h"
#include "driver/vm/disk_images.h"
#include "driver/vm/guest_files.h"
#include "driver/vm/qemu_command.h"

namespace hutch::vm {

class VmInstance;

struct VmDriverOptions {
  std::string state_dir;
  std::string guest_dir;     // scripts/vm-guest's output
  std::string agent_path;    // static hutch-agent
  std::string init_path;     // static hutch-vm-init
  std::string instance_tag;  // cgroup names: <tag>-<sandbox id> (as the jail driver's)
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  std::string accel = "auto";   // auto, tcg, kvm
  std::string user;             // QEMU runs as this user; empty: hutch-vm if it exists, else nobody
  uint32_t uid_base = 1000000;  // owners of template files (shifted back in the image)
  // How long a boot may take until the agent answers (TCG on a loaded
  // 2-core host: a few seconds; generous).
  std::chrono::milliseconds boot_timeout{60000};
  // Boot once per key and restore (true), or cold-boot every sandbox.
  bool boot_snapshots = true;
};

class VmDriver : public Driver {
 public:
  static Result<std::unique_ptr<VmDriver>> Make(const VmDriverOptions& opts);
  std::string name() const override { return "vm"; }
  asio::awaitable<Result<std::shared_ptr<Instance>>> Create(const InstanceSpec& spec) override;
  asio::awaitable<Result<std::shared_ptr<Instance>>> Adopt(const InstanceSpec& spec,
                                                           const std::string& facts,
                                                           bool paused) override;
  int ReconcileAtStart(const std::set<std::string>& keep) override;
  const std::string& kernel_release() const { return kernel_release_; }
  const AccelChoice& accel() const { return accel_; }

 private:
  // A boot snapshot loaded for this run: its directory and its RAM as a
  // sealed memfd (sealed_ram.h), shared by every restore of the key.
  struct LoadedSnapshot {
    std::string dir;
    UniqueFd ram;
    uint64_t last_used = 0;  // the restore counter's value at its last use
  };
  // Loaded snapshots kept: each holds its guest RAM size of host memory
  // (sealed_ram.h). The least recently used one beyond this is let go
  // (VMs restored from it keep their own reference; a later create of its
  // key loads it again from disk).
  static constexpr size_t kLoadedSnapshotsMax = 4;
  // How to start QEMU for one sandbox (vm_driver.cc).
  struct LaunchPlan {
    std::vector<std::pair<std::string, std::string>>
        links;                   // read-only files: source path, name in the dir
    std::string backing;         // the file the sandbox's disk overlay stands on
    std::string backing_format;  // raw or qcow2
    QemuConfig qemu;
    std::vector<int> pass_fds;  // QEMU's fds 3, 4, …
    // A virtio NIC on a tap: in the spec's network slot, or (no slot) in a
    // namespace of its own. Launch opens it and appends it to pass_fds.
    bool nic = false;
  };

  VmDriver(VmDriverOptions opts, std::string kernel_release, AccelChoice accel,
           std::unique_ptr<jail::CgroupManager> cg, uid_t uid, gid_t gid,
           std::string guest_identity);
  // The kernel and initramfs in <vm dir>, made at the first create (a
  // server that never boots a VM copies nothing).
  Result<const GuestFiles*> Guest();
  std::string SandboxDir(const std::string& id) const { return vm_dir_ + "/sandboxes/" + id; }
  std::string PidFile(const std::string& id) const { return vm_dir_ + "/pids/" + id; }
  QemuConfig BaseConfig(const InstanceSpec& spec) const;

  // vm_driver.cc: makes the sandbox directory, starts QEMU in its cgroup,
  // records its pid. The instance owns all of it from then on.
  asio::awaitable<Result<std::shared_ptr<VmInstance>>> Launch(const InstanceSpec& spec,
                                                              LaunchPlan plan);
  // Waits for the agent's hello (a cold boot: the guest greets once up).
  asio::awaitable<Status> WaitAgent(VmInstance& inst,
                                    std::chrono::steady_clock::time_point deadline);
  asio::awaitable<Result<std::shared_ptr<Instance>>> CreateCold(const InstanceSpec& spec,
                                                                const std::string& rootfs,
                                                                const std::string& blank);

  // vm_restore.cc: boot snapshots, restores and fork children.
  asio::awaitable<Result<std::shared_ptr<const LoadedSnapshot>>> BootSnapshot(
      const InstanceSpec& spec, const std::string& rootfs, const std::string& blank);
  asio::awaitable<Status> BuildBootSnapshot(const InstanceSpec& spec, const std::string& rootfs,
                                            const std::string& blank, const std::string& key);
  asio::awaitable<Result<std::shared_ptr<Instance>>> Restore(const InstanceSpec& spec,
                                                             const std::string& rootfs,
                                                             const std::string& blank,
                                                             const LoadedSnapshot& snap);
  asio::awaitable<Result<std::shared_ptr<Instance>>> RestoreFork(const InstanceSpec& spec,
                                                                 const std::string& rootfs,
                                                                 const std::string& blank);
  // After a load: cont, reconnect the agent, give the guest its identity.
  // `ignore_shared`: the stream was saved without the RAM (a boot snapshot).
  asio::awaitable<Status> Awaken(VmInstance& inst, const InstanceSpec& spec, bool ignore_shared,
                                 std::chrono::steady_clock::time_point deadline);

  VmDriverOptions opts_;
  std::string vm_dir_;
  std::string kernel_release_;
  std::optional<GuestFiles> guest_;
  AccelChoice accel_;
  std::unique_ptr<jail::CgroupManager> cgroups_;
  DiskImages images_;
  uid_t uid_;
  gid_t gid_;
  std::string guest_identity_;
  std::map<std::string, std::shared_ptr<LoadedSnapshot>> snapshots_;  // by boot key
  uint64_t restores_ = 0;
  std::set<std::string> building_;             // boot keys being built
  std::map<std::string, std::string> failed_;  // boot key -> why its build failed
};

}  // namespace hutch::vm
