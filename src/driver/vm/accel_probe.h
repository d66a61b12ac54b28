// Which accelerator QEMU gets. KVM only where a probe says stock guest
// kernels run on it; otherwise TCG (binary translation: slower, but works
// on any host, including inside a VM without nested virtualization).
#pragma once

#include <string>

#include "driver/vm/qemu_command.h"

namespace hutch::vm {

struct AccelChoice {
  Accel accel = Accel::kTcg;
  std::string why;  // for the log and /v1/info
};

// `want`: "auto", "tcg" or "kvm". Auto takes KVM when /dev/kvm opens and
// the host's KVM is a plain one (kvm_intel or kvm_amd). KVM-PVM (the
// kvm_pvm module, this project's machines) runs only guest kernels built
// for PVM: Debian's kernel hangs or dies in emulation there, so auto
// answers TCG.
AccelChoice ChooseAccel(const std::string& want);

}  // namespace hutch::vm
