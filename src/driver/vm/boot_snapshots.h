// Boot snapshots of the vm driver ("boot once, restore many",
// docs/vm-driver.md): the state of a freshly booted VM whose agent has
// answered, saved once per boot key, from which later creates restore
// instead of booting.
//
//   <vm dir>/snapshots/<key>/state       migration stream (devices; RAM is not in it)
//                            ram         guest RAM (the base VM's shared memory file)
//                            disk.qcow2  the base VM's disk overlay (over disk-base.img)
//                            guest       the guest identity it was made with
//                            rootfs      the root image it was made on
//
// All root-owned and read-only; the directory is root-only (0700). QEMU
// never opens these by name: a restore links the disk into its sandbox
// directory, gets the stream as an fd and the RAM as a sealed memfd.
// A build happens in .build-<key> and is renamed into place when complete,
// so a directory without the prefix is always whole.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hutch::vm {

inline constexpr const char* kStateFile = "state";
inline constexpr const char* kSnapshotsBuildPrefix = ".build-";

// What a boot depends on; any change means another snapshot.
struct BootKeyParts {
  std::string rootfs_image;  // the template stack's image (its name carries the stack's key)
  std::string blank_disk;    // the disk_mb's blank image
  int64_t memory_mb = 0;
  int vcpus = 1;
  std::string accel;           // tcg or kvm
  std::string guest_identity;  // kernel, init, agent, modules and QEMU (GuestIdentity)
  bool nic = false;            // a virtio NIC (sandboxes with a network)
};
std::string BootKey(const BootKeyParts& p);

// A digest of everything a booted guest is made of: the guest kernel
// (size, mtime), the modules archive, hutch-vm-init and hutch-agent
// (contents) and the QEMU binary (size, mtime). A new agent or kernel
// gives every key a new value, so old snapshots are never restored.
Result<std::string> GuestIdentity(const std::string& guest_dir, const std::string& init_path,
                                  const std::string& agent_path, const std::string& qemu);

// Makes the finished build in `build_dir` the snapshot `final_dir`: files
// root-owned and read-only, the identity and root image recorded, then
// one rename.
Status InstallBootSnapshot(const std::string& build_dir, const std::string& final_dir,
                           const std::string& guest_identity, const std::string& rootfs_image);

// At start: removes half-written builds, and snapshots made for another
// guest identity or on a root image that no longer exists (their key can
// never come up again). Returns how many it removed.
int RemoveStaleBootSnapshots(const std::string& dir, const std::string& guest_identity);

}  // namespace hutch::vm
