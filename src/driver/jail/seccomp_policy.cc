#include "driver/jail/seccomp_policy.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "common/unique_fd.h"

namespace hutch::jail {

namespace {

// Syscalls no sandboxed program needs and that widen the kernel attack
// surface or reach host-global state. Most already fail in an unprivileged
// user namespace; denying them here is the second wall.
constexpr const char* kDenied[] = {
    "mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff", "reboot",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "userfaultfd", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv",
    "process_vm_writev", "pidfd_getfd", "kcmp", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "open_by_handle_at", "name_to_handle_at", "setns",
    "unshare", "acct", "quotactl", "quotactl_fd", "lookup_dcookie", "syslog", "vhangup",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "iopl", "ioperm", "uselib", "sethostname", "setdomainname", "nfsservctl",
    "fanotify_init", "landlock_create_ruleset",
};

struct CtxDeleter {
  void operator()(void* c) const { seccomp_release(static_cast<scmp_filter_ctx>(c)); }
};

}  // namespace

Result<SeccompPolicy> SeccompPolicy::Build() {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return MakeError(Code::kInternal, "seccomp_init failed");
  // A syscall from a foreign ABI (int 0x80 / x32) bypasses the per-arch
  // numbers below: kill the process instead of letting it through.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0)
    return ErrnoError("seccomp badarch", -rc);

  const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this arch / too old a libseccomp
    if (int rc = seccomp_rule_add(ctx.get(), deny, nr, 0); rc < 0)
      return ErrnoError(std::string("seccomp rule ") + name, -rc);
  }
  // clone() may make threads and processes but no new namespaces.
  const uint64_t ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,   CLONE_NEWNET,
                               CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP, CLONE_NEWTIME};
  for (uint64_t f : ns_flags) {
    if (int rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
        rc < 0)
      return ErrnoError("seccomp rule clone", -rc);
  }
  // clone3 passes flags in a struct that BPF cannot read: answer ENOSYS so
  // libc falls back to clone(), whose flags are checked above.
  if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc < 0)
    return ErrnoError("seccomp rule clone3", -rc);
  // Device nodes: FIFOs and sockets are fine, block/char devices are not.
  for (const char* name : {"mknod", "mknodat"}) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    unsigned arg = std::string_view(name) == "mknod" ? 1 : 2;
    for (uint64_t type : {uint64_t{S_IFBLK}, uint64_t{S_IFCHR}}) {
      scmp_arg_cmp cmp{arg, SCMP_CMP_MASKED_EQ, S_IFMT, type};
      if (int rc = seccomp_rule_add_array(ctx.get(), deny, nr, 1, &cmp); rc < 0)
        return ErrnoError(std::string("seccomp rule ") + name, -rc);
    }
  }
  // TIOCSTI pushes bytes into a terminal's input queue: a classic way out of
  // a shared tty.
  if (int rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(ioctl), 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
      rc < 0)
    return ErrnoError("seccomp rule ioctl", -rc);

  // Export the compiled BPF through a memfd and keep it in memory.
  UniqueFd mfd(memfd_create("hutch-seccomp", MFD_CLOEXEC));
  if (!mfd) return ErrnoError("memfd_create");
  if (int rc = seccomp_export_bpf(ctx.get(), mfd.get()); rc < 0)
    return ErrnoError("seccomp_export_bpf", -rc);
  off_t size = lseek(mfd.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0)
    return MakeError(Code::kInternal, "seccomp export produced " + std::to_string(size) + " bytes");
  SeccompPolicy p;
  p.filter_.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (pread(mfd.get(), p.filter_.data(), static_cast<size_t>(size), 0) != size)
    return ErrnoError("read seccomp program");
  p.Point();
  return p;
}

}  // namespace hutch::jail
