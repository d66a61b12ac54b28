#include "driver/jail/seccomp_table.h"

#include <errno.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstring>

namespace hutch::jail {

namespace {

using A = SeccompAction;

// clone() makes threads and processes, never namespaces.
constexpr uint64_t kCloneNsFlags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                   CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP | CLONE_NEWTIME;
constexpr uint64_t kNoNsFlags[] = {0};
constexpr SeccompArgFilter kClone{.arg = 0,
                                  .mask = kCloneNsFlags,
                                  .allowed = kNoNsFlags,
                                  .refuse_errno = EPERM,
                                  .what = "no `CLONE_NEW*` flag"};

// The families a sandbox needs; netlink only for NETLINK_ROUTE (0), which
// `ip` and getifaddrs() read.
constexpr uint64_t kFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
constexpr uint64_t kRouteOnly[] = {0};
constexpr SeccompArgFilter kNetlinkProtocol{
    .arg = 2, .allowed = kRouteOnly, .refuse_errno = EAFNOSUPPORT, .what = "NETLINK_ROUTE"};
constexpr SeccompArgFilter kSocketFamily{
    .arg = 0,
    .allowed = kFamilies,
    .refuse_errno = EAFNOSUPPORT,
    .what = "AF_UNIX, AF_INET, AF_INET6, AF_NETLINK with NETLINK_ROUTE",
    .refine_value = AF_NETLINK,
    .refine = &kNetlinkProtocol};

// Docker's five: PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32 and
// the query 0xffffffff.
constexpr uint64_t kPersonalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
constexpr SeccompArgFilter kPersonality{.arg = 0,
                                        .allowed = kPersonalities,
                                        .refuse_errno = EPERM,
                                        .what = "0, 0x8, 0x20000, 0x20008, 0xffffffff (as Docker)"};

// Files, FIFOs and sockets; no block or character devices.
constexpr uint64_t kNodeTypes[] = {0, S_IFREG, S_IFIFO, S_IFSOCK};
constexpr SeccompArgFilter kMknod{.arg = 1,
                                  .mask = S_IFMT,
                                  .allowed = kNodeTypes,
                                  .refuse_errno = EPERM,
                                  .what = "a regular file, FIFO or socket node"};
constexpr SeccompArgFilter kMknodat{.arg = 2,
                                    .mask = S_IFMT,
                                    .allowed = kNodeTypes,
                                    .refuse_errno = EPERM,
                                    .what = "a regular file, FIFO or socket node"};

// Every request but TIOCSTI.
constexpr uint64_t kTiocsti[] = {TIOCSTI};
constexpr SeccompArgFilter kIoctl{.arg = 1,
                                  .allowed = kTiocsti,
                                  .refuse_errno = EPERM,
                                  .what = "any request but TIOCSTI",
                                  .values_are_refused = true};

constexpr const char* kDockerAllows = "allow";

constexpr SeccompRule kTable[] = {
    // --- allowed: what programs do ---
    {"read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 lseek close "
     "close_range dup dup2 "
     "dup3 fcntl flock fsync fdatasync syncfs sync sync_file_range fadvise64 readahead fallocate "
     "truncate ftruncate "
     "sendfile splice tee vmsplice copy_file_range",
     A::kAllow, nullptr, kDockerAllows, "file descriptors and their data"},
    {"open openat openat2 creat access faccessat faccessat2 stat fstat lstat newfstatat statx "
     "statfs fstatfs "
     "getdents getdents64 getcwd chdir fchdir rename renameat renameat2 mkdir mkdirat rmdir link "
     "linkat symlink "
     "symlinkat unlink unlinkat readlink readlinkat chmod fchmod fchmodat fchmodat2 chown fchown "
     "lchown fchownat "
     "umask utime utimes utimensat futimesat",
     A::kAllow, nullptr, kDockerAllows, "files and directories by path"},
    {"setxattr lsetxattr fsetxattr getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr "
     "removexattr "
     "lremovexattr fremovexattr",
     A::kAllow, nullptr, kDockerAllows, "extended attributes"},
    {"brk mmap munmap mprotect mremap msync mincore madvise mlock mlock2 munlock mlockall "
     "munlockall "
     "remap_file_pages membarrier memfd_create memfd_secret pkey_mprotect pkey_alloc pkey_free",
     A::kAllow, nullptr, kDockerAllows,
     "memory of the process itself (locked memory is charged to the cgroup)"},
    {"fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill getpid getppid "
     "gettid getpgid "
     "setpgid getpgrp getsid setsid set_tid_address set_robust_list get_robust_list rseq "
     "arch_prctl modify_ldt "
     "set_thread_area get_thread_area prctl seccomp restart_syscall pidfd_open pidfd_send_signal "
     "process_mrelease",
     A::kAllow, nullptr, kDockerAllows,
     "processes and threads (signals reach only the sandbox's pid namespace; a nested filter can "
     "only narrow "
     "this one)"},
    {"getuid geteuid getgid getegid getresuid getresgid getgroups setuid setgid setreuid setregid "
     "setresuid "
     "setresgid setfsuid setfsgid setgroups capget capset",
     A::kAllow, nullptr, kDockerAllows, "ids and capabilities inside the sandbox's user namespace"},
    {"rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigqueueinfo "
     "rt_tgsigqueueinfo "
     "rt_sigsuspend sigaltstack signalfd signalfd4 pause",
     A::kAllow, nullptr, kDockerAllows, "signals"},
    {"nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time alarm getitimer "
     "setitimer "
     "timer_create timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create "
     "timerfd_settime "
     "timerfd_gettime times",
     A::kAllow, nullptr, kDockerAllows, "reading clocks, sleeping, timers"},
    {"poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait "
     "epoll_pwait2 "
     "epoll_ctl_old epoll_wait_old eventfd eventfd2 inotify_init inotify_init1 inotify_add_watch "
     "inotify_rm_watch "
     "fanotify_mark futex futex_waitv",
     A::kAllow, nullptr, kDockerAllows, "waiting for events"},
    {"sched_yield sched_setparam sched_getparam sched_setscheduler sched_getscheduler "
     "sched_get_priority_max "
     "sched_get_priority_min sched_rr_get_interval sched_setaffinity sched_getaffinity "
     "sched_setattr "
     "sched_getattr getpriority setpriority ioprio_get ioprio_set getrlimit setrlimit prlimit64 "
     "getrusage "
     "sysinfo uname getrandom getcpu",
     A::kAllow, nullptr, kDockerAllows,
     "scheduling and limits of its own processes (the cgroup caps CPU; raising a hard limit needs "
     "CAP_SYS_RESOURCE, which is dropped)"},
    {"io_setup io_destroy io_getevents io_submit io_cancel io_pgetevents", A::kAllow, nullptr,
     kDockerAllows, "Linux AIO (databases use it)"},
    {"pipe pipe2 shmget shmat shmctl shmdt semget semop semctl semtimedop msgget msgsnd msgrcv "
     "msgctl mq_open "
     "mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr",
     A::kAllow, nullptr, kDockerAllows,
     "pipes and System V / POSIX IPC, in the sandbox's own IPC namespace"},
    {"connect accept accept4 bind listen getsockname getpeername setsockopt getsockopt sendto "
     "recvfrom sendmsg "
     "recvmsg sendmmsg recvmmsg shutdown",
     A::kAllow, nullptr, kDockerAllows,
     "sockets once made (which sockets can be made: `socket` below)"},

    // --- allowed with a condition on an argument ---
    {"socket socketpair", A::kArgs, &kSocketFamily, "allow unless AF_VSOCK (EPERM)",
     "stricter: AF_VSOCK reached the hypervisor of a host that is itself a VM, outside every "
     "network policy "
     "(issue 32); AF_PACKET, AF_KEY, AF_ALG, the other netlink protocols and the rest are kernel "
     "code no "
     "workload here needs. EAFNOSUPPORT, as on a kernel built without the family, is what libc and "
     "libaudit "
     "take as \"not available\""},
    {"clone", A::kArgs, &kClone, "allow without `CLONE_NEW*` flags (with them: CAP_SYS_ADMIN only)",
     "the same: no nested namespaces"},
    {"personality", A::kArgs, &kPersonality, "the same five values",
     "the same: other personalities (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC) weaken the process's "
     "own hardening"},
    {"mknod", A::kArgs, &kMknod,
     "allow (CAP_MKNOD is a default capability; the device cgroup refuses use)",
     "stricter: no device node is made at all, so none can be opened later"},
    {"mknodat", A::kArgs, &kMknodat, "allow (as mknod)", "as mknod"},
    {"ioctl", A::kArgs, &kIoctl, "allow",
     "stricter: TIOCSTI pushes bytes into a terminal's input, a way out of a shared tty"},

    // --- refused ---
    {"clone3", A::kEnosys, nullptr, "ENOSYS (without CAP_SYS_ADMIN)",
     "the same: its flags are in memory BPF cannot read, and ENOSYS makes libc fall back to "
     "`clone`"},
    {"mount umount2 pivot_root open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr",
     A::kEperm, nullptr, "refused (CAP_SYS_ADMIN only; pivot_root always)",
     "the same: the sandbox's mounts are hutch's"},
    {"chroot", A::kEperm, nullptr, "allow (CAP_SYS_CHROOT is a default capability)",
     "stricter: no workload of a sandbox needs it, and it is the first step of the classic chroot "
     "escape"},
    {"unshare setns", A::kEperm, nullptr, "refused (CAP_SYS_ADMIN only)",
     "the same: nested user namespaces open kernel code that is otherwise root-only"},
    {"init_module finit_module delete_module kexec_load kexec_file_load", A::kEperm, nullptr,
     "refused (modules: CAP_SYS_MODULE only)", "the same: the kernel is the host's"},
    {"reboot swapon swapoff", A::kEperm, nullptr, "refused (reboot: CAP_SYS_BOOT only)",
     "the same: host-global"},
    {"bpf perf_event_open", A::kEperm, nullptr,
     "refused (CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON only)",
     "the same: verifier and perf bugs are a steady source of kernel exploits"},
    {"io_uring_setup io_uring_enter io_uring_register", A::kEperm, nullptr,
     "refused since Docker 25 (allowed before)",
     "the same as current Docker: a large, fast-moving kernel surface outside seccomp's view"},
    {"userfaultfd keyctl add_key request_key", A::kEperm, nullptr, "refused",
     "the same: userfaultfd stalls kernel code at will (an exploit staple); keyrings are not "
     "namespaced"},
    {"ptrace process_vm_readv process_vm_writev", A::kEperm, nullptr, "allow (kernel 4.8 or later)",
     "stricter: PID 1 of the sandbox is hutch-agent, which no process inside may stop, read or "
     "write"},
    {"kcmp pidfd_getfd process_madvise", A::kEperm, nullptr, "refused (CAP_SYS_PTRACE only)",
     "the same (process_madvise was allowed by hutch's deny-list until issue 32)"},
    {"settimeofday clock_settime", A::kEperm, nullptr, "refused (CAP_SYS_TIME only)",
     "the same: the clock is the host's"},
    {"adjtimex clock_adjtime", A::kEperm, nullptr, "allow (changes need CAP_SYS_TIME)",
     "stricter: the clock is the host's, and no sandbox runs an NTP daemon"},
    {"open_by_handle_at name_to_handle_at", A::kEperm, nullptr,
     "open_by_handle_at: CAP_DAC_READ_SEARCH only; name_to_handle_at: allow",
     "stricter for name_to_handle_at: handles are for file servers; open_by_handle_at is the "
     "\"shocker\" "
     "escape"},
    {"acct quotactl quotactl_fd lookup_dcookie syslog vhangup fanotify_init", A::kEperm, nullptr,
     "refused (each needs a capability Docker does not grant)",
     "the same: host-global or privileged"},
    {"iopl ioperm", A::kEperm, nullptr, "refused (CAP_SYS_RAWIO only)",
     "the same: raw hardware access"},
    {"sethostname setdomainname", A::kEperm, nullptr, "refused (CAP_SYS_ADMIN only)",
     "the same: hutch names the sandbox's UTS namespace"},
    {"mbind set_mempolicy get_mempolicy set_mempolicy_home_node migrate_pages move_pages",
     A::kEperm, nullptr, "refused (the first four: CAP_SYS_NICE only)",
     "the same (hutch allowed them until issue 32): NUMA placement is the host's"},
    {"sysfs ustat uselib", A::kEperm, nullptr, "refused",
     "the same (sysfs and ustat were allowed until issue 32): obsolete, and each reads host-global "
     "state"},
    {"landlock_create_ruleset landlock_add_rule landlock_restrict_self", A::kEnosys, nullptr,
     "allow",
     "stricter: answered as by a kernel without Landlock, which programs that use it expect and "
     "handle"},
};

const char* ErrnoName(int e) {
  switch (e) {
    case EPERM:
      return "EPERM";
    case ENOSYS:
      return "ENOSYS";
    case EAFNOSUPPORT:
      return "EAFNOSUPPORT";
    default:
      return "errno";
  }
}

}  // namespace

std::span<const SeccompRule> SeccompTable() { return kTable; }

std::string SeccompTableMarkdown() {
  std::string out = "| syscalls | hutch | Docker's default profile | why |\n|---|---|---|---|\n";
  for (const SeccompRule& r : kTable) {
    std::string names;
    for (const char* p = r.names; *p; ++p) {
      if (*p == ' ') {
        names += ", ";
      } else {
        if (p == r.names || p[-1] == ' ') names += '`';
        names += *p;
        if (p[1] == ' ' || p[1] == '\0') names += '`';
      }
    }
    std::string action;
    switch (r.action) {
      case A::kAllow:
        action = "allow";
        break;
      case A::kEperm:
        action = "EPERM";
        break;
      case A::kEnosys:
        action = "ENOSYS";
        break;
      case A::kArgs:
        action = std::string("allow if ") + r.filter->what + ", else " +
                 ErrnoName(r.filter->refuse_errno);
        break;
    }
    out += "| " + names + " | " + action + " | " + r.docker + " | " + r.why + " |\n";
  }
  out +=
      "| any other | ENOSYS | EPERM (runc: ENOSYS for numbers newer than the profile) | a call "
      "newer than the "
      "table answers as on an older kernel, so libc falls back |\n";
  return out;
}

}  // namespace hutch::jail
