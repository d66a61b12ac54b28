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
// can write).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "driver/driver.h"
#include "driver/jail/cgroup.h"
#include "driver/vm/accel_probe.h"
#include "driver/vm/disk_images.h"
#include "driver/vm/guest_files.h"

namespace hutch::vm {

struct VmDriverOptions {
  std::string state_dir;
  std::string guest_dir;      // scripts/vm-guest's output
  std::string agent_path;     // static hutch-agent
  std::string init_path;      // static hutch-vm-init
  std::string instance_tag;   // cgroup names: <tag>-<sandbox id> (as the jail driver's)
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  std::string accel = "auto";  // auto, tcg, kvm
  std::string user;            // QEMU runs as this user; empty: hutch-vm if it exists, else nobody
  uint32_t uid_base = 1000000; // owners of template files (shifted back in the image)
  // How long a boot may take until the agent answers (TCG on a loaded
  // 2-core host: a few seconds; generous).
  std::chrono::milliseconds boot_timeout{60000};
};

class VmDriver : public Driver {
 public:
  static Result<std::unique_ptr<VmDriver>> Make(const VmDriverOptions& opts);
  std::string name() const override { return "vm"; }
  asio::awaitable<Result<std::shared_ptr<Instance>>> Create(const InstanceSpec& spec) override;
  asio::awaitable<Result<std::shared_ptr<Instance>>> Adopt(const InstanceSpec& spec, const std::string& facts,
                                                          bool paused) override;
  int ReconcileAtStart(const std::set<std::string>& keep) override;
  const std::string& kernel_release() const { return kernel_release_; }
  const AccelChoice& accel() const { return accel_; }

 private:
  VmDriver(VmDriverOptions opts, std::string kernel_release, AccelChoice accel,
           std::unique_ptr<jail::CgroupManager> cg, uid_t uid, gid_t gid);
  // The kernel and initramfs in <vm dir>, made at the first create (a
  // server that never boots a VM copies nothing).
  Result<const GuestFiles*> Guest();
  std::string SandboxDir(const std::string& id) const { return vm_dir_ + "/sandboxes/" + id; }
  std::string PidFile(const std::string& id) const { return vm_dir_ + "/pids/" + id; }

  VmDriverOptions opts_;
  std::string vm_dir_;
  std::string kernel_release_;
  std::optional<GuestFiles> guest_;
  AccelChoice accel_;
  std::unique_ptr<jail::CgroupManager> cgroups_;
  DiskImages images_;
  uid_t uid_;
  gid_t gid_;
};

}  // namespace hutch::vm
