#include "driver/vm/qemu_command.h"

#include "driver/vm/guest_network.h"

namespace hutch::vm {

std::vector<std::string> QemuArgv(const QemuConfig& c) {
  std::vector<std::string> a = {c.qemu,       "-nodefaults", "-no-user-config",
                                "-nographic", "-display",    "none"};
  // A guest that powers off, reboots or panics (panic=-1) makes QEMU exit:
  // the host sees the sandbox end instead of a reboot loop.
  a.insert(a.end(), {"-no-reboot", "-machine", "q35,memory-backend=ram"});
  if (c.accel == Accel::kKvm) {
    a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  } else {
    // TCG's translation cache defaults to 1 GiB of host memory per VM;
    // 64 MiB keeps a sandbox's footprint near its guest RAM.
    a.insert(a.end(), {"-accel", "tcg,tb-size=64", "-cpu", "max"});
  }
  const std::string size = std::to_string(c.memory_mb) + "M";
  std::string ram;
  switch (c.ram) {
    case RamKind::kAnonymous:
      ram = "memory-backend-ram,id=ram,size=" + size;
      break;
    case RamKind::kSharedFile:
      ram = "memory-backend-file,id=ram,size=" + size + ",share=on,mem-path=" + c.ram_path;
      break;
    case RamKind::kPrivateFile:
      ram = "memory-backend-file,id=ram,size=" + size + ",share=off,mem-path=" + c.ram_path;
      break;
  }
  a.insert(a.end(), {"-m", size, "-object", ram, "-smp", std::to_string(c.vcpus)});
  // A restore waits for hutchd to set the migration capabilities over QMP
  // (7.2 has no command-line switch for x-ignore-shared), then loads.
  if (c.incoming) a.insert(a.end(), {"-incoming", "defer"});
  a.insert(a.end(), {"-kernel", kKernelFile, "-initrd", kInitrdFile});
  // quiet: the console is a slow emulated UART under TCG; only warnings and
  // hutch-vm-init's failures reach console.log. no_timer_check: on a
  // loaded host a TCG guest's early timer check sees too few ticks and the
  // kernel panics ("IO-APIC + timer doesn't work"); virtual hardware has a
  // working timer, so the check only ever fails spuriously.
  a.insert(a.end(),
           {"-append", "console=ttyS0 quiet panic=-1 no_timer_check rdinit=/init hutch.id=" +
                           c.sandbox_id + (c.tap_fd >= 0 ? " hutch.net=1" : "")});
  a.insert(a.end(), {"-serial", std::string("file:") + kConsoleLog});
  a.insert(a.end(),
           {"-drive", std::string("if=none,id=root,format=raw,readonly=on,file=") + kRootfsFile,
            "-device", "virtio-blk-pci,drive=root"});
  // The sandbox's writes grow a sparse qcow2 in the state dir. When the
  // host's disk is full, the guest gets an I/O error (its disk is full)
  // instead of QEMU's default, pausing the VM: a paused guest would hold
  // every request to the sandbox until its TTL.
  a.insert(
      a.end(),
      {"-drive",
       std::string("if=none,id=disk,format=qcow2,discard=unmap,werror=report,rerror=report,file=") +
           kDiskFile,
       "-device", "virtio-blk-pci,drive=disk"});
  a.insert(a.end(),
           {"-device", "virtio-serial-pci,id=vser", "-chardev",
            std::string("socket,id=agent,server=on,wait=off,path=") + kAgentSocket, "-device",
            std::string("virtserialport,bus=vser.0,chardev=agent,name=") + kAgentPortName});
  if (c.tap_fd >= 0) {
    // No option ROM (network boot): the kernel is loaded directly. No
    // vhost: the host may lack vhost-net, and the fd is all QEMU gets.
    a.insert(a.end(), {"-netdev", "tap,id=net0,vhost=off,fd=" + std::to_string(c.tap_fd), "-device",
                       std::string("virtio-net-pci,netdev=net0,romfile=,mac=") + kGuestMac});
  }
  a.insert(a.end(), {"-chardev", std::string("socket,id=qmp,server=on,wait=off,path=") + kQmpSocket,
                     "-mon", "chardev=qmp,mode=control"});
  a.insert(a.end(),
           {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  return a;
}

}  // namespace hutch::vm
