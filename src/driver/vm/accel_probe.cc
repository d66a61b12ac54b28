#include "driver/vm/accel_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace hutch::vm {

namespace {
bool ModuleLoaded(const char* name) {
  return access((std::string("/sys/module/") + name).c_str(), F_OK) == 0;
}
}  // namespace

AccelChoice ChooseAccel(const std::string& want) {
  if (want == "tcg") return {Accel::kTcg, "tcg (asked)"};
  UniqueFd kvm(open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (want == "kvm")
    return {Accel::kKvm, kvm ? "kvm (asked)" : "kvm (asked; /dev/kvm does not open)"};
  if (!kvm) return {Accel::kTcg, "tcg (/dev/kvm does not open)"};
  if (ModuleLoaded("kvm_pvm"))
    return {Accel::kTcg, "tcg (KVM is KVM-PVM: stock guest kernels do not run on it)"};
  if (ModuleLoaded("kvm_intel") || ModuleLoaded("kvm_amd")) return {Accel::kKvm, "kvm"};
  return {Accel::kTcg, "tcg (unknown KVM flavour)"};
}

}  // namespace hutch::vm
