// QEMU's command line for one vm sandbox. Only what the guest needs:
// `-nodefaults` (no default NIC, VGA, floppy, CD, serial), q35 with the
// PVH entry of an uncompressed vmlinux (no firmware boot, no
// decompression), two virtio disks, one virtio-serial port for the agent,
// a virtio NIC on a tap fd hutchd opened when the sandbox has a network,
// QMP on a unix socket, the kernel console to a file, and QEMU's own
// seccomp filter (`-sandbox on`: no obsolete syscalls, no set*id, no
// fork/exec, no scheduler/affinity changes).
//
// Every path is relative: QEMU runs in the sandbox's directory (see
// qemu_process.h), which holds or links all its files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hutch::vm {

// Names inside a sandbox directory.
inline constexpr const char* kKernelFile = "vmlinux";
inline constexpr const char* kInitrdFile = "initrd.cpio";
inline constexpr const char* kRootfsFile = "rootfs.img";
inline constexpr const char* kDiskBaseFile = "disk-base.img";
inline constexpr const char* kDiskFile = "disk.qcow2";
inline constexpr const char* kAgentSocket = "agent.sock";
inline constexpr const char* kQmpSocket = "qmp.sock";
inline constexpr const char* kConsoleLog = "console.log";
// The virtio-serial port's name; hutch-vm-init looks it up in sysfs.
inline constexpr const char* kAgentPortName = "hutch.agent";

// The base VM's guest RAM file, in its build directory (docs/vm-driver.md
// "Boot once, restore many").
inline constexpr const char* kRamFile = "ram";
// Names in a restored sandbox's directory: the disk its own overlay stands
// on (a boot snapshot's disk) and a fork's copy of its source's disk are
// read-only links; fork copies are named fork-<id>.qcow2.
inline constexpr const char* kSnapDiskFile = "snap-disk.qcow2";

enum class Accel { kTcg, kKvm };

// Where guest RAM lives. Every VM names its RAM block "ram" (the backend's
// id), so the migration stream of any VM loads into any other of the same
// size: a cold boot, a restored sandbox and a fork child alike.
enum class RamKind {
  kAnonymous,    // private anonymous memory (a cold boot, a fork child)
  kSharedFile,   // `ram_path` mapped shared: the base VM of a boot snapshot
  kPrivateFile,  // `ram_path` mapped private (copy-on-write): a restored sandbox
};

struct QemuConfig {
  std::string qemu = "/usr/bin/qemu-system-x86_64";
  std::string sandbox_id;  // hostname, on the kernel command line
  Accel accel = Accel::kTcg;
  int vcpus = 1;
  int64_t memory_mb = 512;
  RamKind ram = RamKind::kAnonymous;
  std::string ram_path;  // kSharedFile, kPrivateFile
  // Start waiting for a migration stream (`-incoming defer`; FinishIncoming
  // in migration.h sets the capabilities and starts the load).
  bool incoming = false;
  // QEMU's fd number of the guest's tap device (guest_network.h), which
  // gives the guest a virtio NIC; -1: no NIC, the guest has loopback only.
  int tap_fd = -1;
};

std::vector<std::string> QemuArgv(const QemuConfig& c);

// QEMU's own memory beyond guest RAM, for the cgroup limit: the TCG
// translation cache (capped by tb-size below), device and I/O buffers.
inline constexpr int64_t kQemuOverheadMb = 192;

}  // namespace hutch::vm
