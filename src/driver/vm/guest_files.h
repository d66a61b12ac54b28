// The files every vm sandbox boots from, prepared once when hutchd starts:
// Debian's cloud kernel (scripts/vm-guest's vmlinux) and the initramfs,
// which is scripts/vm-guest's modules archive followed by hutchd's own
// archive of hutch-vm-init (as /init) and hutch-agent. Both are placed in
// <vm dir> so each sandbox directory can hard-link them (QEMU, confined to
// its sandbox directory, opens them by relative path).
#pragma once

#include <string>

#include "common/result.h"

namespace hutch::vm {

struct GuestFiles {
  std::string kernel;          // <vm dir>/vmlinux
  std::string initrd;          // <vm dir>/initrd.cpio
  std::string kernel_release;  // `uname -r` in the guest
};

// A whole file's bytes (the guest kit's files, snapshot inputs).
Result<std::string> ReadAll(const std::string& path);

// `guest_dir` is scripts/vm-guest's output; `init_path` and `agent_path`
// are the static hutch-vm-init and hutch-agent binaries.
Result<GuestFiles> PrepareGuestFiles(const std::string& guest_dir, const std::string& vm_dir,
                                     const std::string& init_path, const std::string& agent_path);

}  // namespace hutch::vm
