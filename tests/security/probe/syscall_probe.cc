// hutch-syscall-probe: runs inside a sandbox (static, no sanitizer, no
// libstdc++ beyond what libc gives) and tries ONE syscall a hostile workload
// would use to escape, named on the command line. It prints
//   <name> <return value> <errno>
// and exits 0, so the test reads the exact failure. Arguments are valid
// enough that, without the seccomp filter, the kernel would get past its
// argument checks to the permission check (or succeed): an EPERM seen here
// is the filter's answer, not a side effect of a malformed call.
//
// Calls go through syscall(2) with the raw number: libc wrappers may be
// missing (kexec_load, pivot_root) or emulate behaviour (clone3 fallback).
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

long Try(const char* what) {
  long rc = -1;
  errno = 0;
  const char* n = what;
  static char buf[4096];
  if (!strcmp(n, "mount")) {
    rc = syscall(SYS_mount, "none", "/mnt", "tmpfs", 0L, nullptr);
  } else if (!strcmp(n, "umount2")) {
    rc = syscall(SYS_umount2, "/proc", 2L /* MNT_DETACH */);
  } else if (!strcmp(n, "pivot_root")) {
    rc = syscall(SYS_pivot_root, "/tmp", "/tmp");
  } else if (!strcmp(n, "unshare_user")) {
    rc = syscall(SYS_unshare, static_cast<long>(CLONE_NEWUSER));
  } else if (!strcmp(n, "clone_newuser")) {
    // Raw clone with a fork-like (null) stack: a child that got through
    // exits at once, so the probe still prints one line.
    rc = syscall(SYS_clone, static_cast<long>(CLONE_NEWUSER | SIGCHLD), nullptr, nullptr, nullptr,
                 nullptr);
    if (rc == 0) _exit(0);
    if (rc > 0) waitpid(static_cast<pid_t>(rc), nullptr, 0);
  } else if (!strcmp(n, "clone3")) {
    uint64_t args[11] = {};
    args[4] = SIGCHLD;  // exit_signal
    rc = syscall(435 /* clone3 */, args, sizeof args);
    if (rc == 0) _exit(0);
    if (rc > 0) waitpid(static_cast<pid_t>(rc), nullptr, 0);
  } else if (!strcmp(n, "setns")) {
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    rc = syscall(SYS_setns, static_cast<long>(fd), 0L);
  } else if (!strcmp(n, "chroot")) {
    rc = syscall(SYS_chroot, "/tmp");
  } else if (!strcmp(n, "init_module")) {
    // A buffer that is no module: without the filter the kernel answers
    // EPERM (no CAP_SYS_MODULE) or ENOEXEC; with it, EPERM before reading.
    rc = syscall(SYS_init_module, buf, static_cast<unsigned long>(sizeof buf), "");
  } else if (!strcmp(n, "finit_module")) {
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    rc = syscall(SYS_finit_module, static_cast<long>(fd), "", 0L);
  } else if (!strcmp(n, "kexec_load")) {
    rc = syscall(SYS_kexec_load, 0UL, 0UL, nullptr, 0UL);
  } else if (!strcmp(n, "bpf")) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    rc = syscall(SYS_bpf, static_cast<long>(BPF_MAP_CREATE), &attr, sizeof attr);
  } else if (!strcmp(n, "perf_event_open")) {
    struct perf_event_attr pe;
    memset(&pe, 0, sizeof pe);
    pe.type = PERF_TYPE_SOFTWARE;
    pe.size = sizeof pe;
    pe.config = PERF_COUNT_SW_CPU_CLOCK;
    pe.disabled = 1;
    pe.exclude_kernel = 1;
    rc = syscall(SYS_perf_event_open, &pe, 0L, -1L, -1L, 0L);
  } else if (!strcmp(n, "io_uring_setup")) {
    static char params[120];  // struct io_uring_params, zeroed
    rc = syscall(425 /* io_uring_setup */, 8L, params);
  } else if (!strcmp(n, "userfaultfd")) {
    rc = syscall(SYS_userfaultfd, static_cast<long>(O_CLOEXEC));
  } else if (!strcmp(n, "keyctl")) {
    // KEYCTL_GET_KEYRING_ID of the session keyring, creating it.
    rc = syscall(SYS_keyctl, 0L, -3L, 1L);
  } else if (!strcmp(n, "add_key")) {
    rc = syscall(SYS_add_key, "user", "hutch-probe", "payload", 7L, -3L /* session keyring */);
  } else if (!strcmp(n, "ptrace_agent")) {
    // PTRACE_ATTACH to PID 1, the sandbox's agent.
    rc = syscall(SYS_ptrace, 16L, 1L, nullptr, nullptr);
  } else if (!strcmp(n, "ptrace_traceme")) {
    rc = syscall(SYS_ptrace, 0L, 0L, nullptr, nullptr);
  } else if (!strcmp(n, "process_vm_readv")) {
    rc = syscall(SYS_process_vm_readv, 1L, nullptr, 0L, nullptr, 0L, 0L);
  } else if (!strcmp(n, "mknod_block")) {
    rc = syscall(SYS_mknod, "/tmp/hutch-probe-blk", static_cast<long>(S_IFBLK | 0600),
                 static_cast<long>(makedev(8, 0)));
  } else if (!strcmp(n, "mknodat_char")) {
    rc = syscall(SYS_mknodat, static_cast<long>(AT_FDCWD), "/tmp/hutch-probe-chr",
                 static_cast<long>(S_IFCHR | 0600), static_cast<long>(makedev(1, 1)));
  } else if (!strcmp(n, "mknod_fifo")) {
    // The control: FIFOs stay allowed.
    rc = syscall(SYS_mknod, "/tmp/hutch-probe-fifo", static_cast<long>(S_IFIFO | 0600), 0L);
  } else if (!strcmp(n, "reboot")) {
    // LINUX_REBOOT_CMD_CAD_OFF: harmless even if it got through.
    rc = syscall(SYS_reboot, 0xfee1deadL, 672274793L, 0L, nullptr);
  } else if (!strcmp(n, "settimeofday")) {
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    rc = syscall(SYS_settimeofday, &tv, nullptr);
  } else if (!strcmp(n, "clock_settime")) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rc = syscall(SYS_clock_settime, static_cast<long>(CLOCK_REALTIME), &ts);
  } else if (!strcmp(n, "open_by_handle_at")) {
    // A file_handle for the root inode of ext4/xfs-style filesystems, the
    // classic "shocker" escape.
    struct {
      unsigned int handle_bytes;
      int handle_type;
      unsigned char f_handle[8];
    } h = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    rc = syscall(SYS_open_by_handle_at, static_cast<long>(dir), &h, static_cast<long>(O_RDONLY));
  } else if (!strncmp(n, "socket_", 7) || !strncmp(n, "socketpair_", 11)) {
    // socket_<family> / socketpair_<family>: the family filter (issue 32).
    // Protocol 0 where the family has one, so a socket that got through
    // captures or changes nothing.
    const bool pair = n[6] == 'p';
    const char* fam = n + (pair ? 11 : 7);
    int domain = -1, type = SOCK_STREAM, proto = 0;
    if (!strcmp(fam, "unix")) domain = AF_UNIX;
    else if (!strcmp(fam, "inet")) domain = AF_INET;
    else if (!strcmp(fam, "inet6")) domain = AF_INET6;
    else if (!strcmp(fam, "vsock")) domain = AF_VSOCK;
    else if (!strcmp(fam, "packet")) domain = AF_PACKET, type = SOCK_RAW;
    else if (!strcmp(fam, "key")) domain = AF_KEY, type = SOCK_RAW, proto = 2 /* PF_KEY_V2 */;
    else if (!strcmp(fam, "alg")) domain = AF_ALG, type = SOCK_SEQPACKET;
    else if (!strcmp(fam, "netlink_route"))
      domain = AF_NETLINK, type = SOCK_RAW, proto = NETLINK_ROUTE;
    else if (!strcmp(fam, "netlink_audit"))
      domain = AF_NETLINK, type = SOCK_RAW, proto = NETLINK_AUDIT;
    else if (!strcmp(fam, "netlink_uevent"))
      domain = AF_NETLINK, type = SOCK_RAW, proto = NETLINK_KOBJECT_UEVENT;
    // AF_VSOCK with garbage in the upper half of the register: the kernel
    // reads an int, a filter that compared all 64 bits would miss it.
    else if (!strcmp(fam, "vsock_high")) domain = -2;
    if (domain == -1) {
      fprintf(stderr, "unknown family %s\n", fam);
      exit(2);
    }
    if (pair) {
      int sv[2];
      rc = syscall(SYS_socketpair, static_cast<long>(domain), static_cast<long>(type),
                   static_cast<long>(proto), sv);
    } else if (domain == -2) {
      rc = syscall(SYS_socket, static_cast<long>(0x100000000L | AF_VSOCK),
                   static_cast<long>(SOCK_STREAM), 0L);
    } else {
      rc = syscall(SYS_socket, static_cast<long>(domain), static_cast<long>(type),
                   static_cast<long>(proto));
    }
  } else if (!strcmp(n, "open_tree_attr")) {
    // Newer than the policy's table (Linux 6.15, x86_64 467): an
    // allow-list answers ENOSYS; a deny-list let it through.
    rc = syscall(467, static_cast<long>(AT_FDCWD), "/", 0L, nullptr, 0L);
  } else if (!strcmp(n, "syscall_1000")) {
    rc = syscall(1000L, 0L, 0L, 0L);
  } else if (!strcmp(n, "mbind") || !strcmp(n, "move_pages")) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!strcmp(n, "mbind")) {
      rc = syscall(SYS_mbind, page, 4096L, 0L /* MPOL_DEFAULT */, nullptr, 0L, 0L);
    } else {
      int status = 0;
      rc = syscall(SYS_move_pages, 0L, 1L, &page, nullptr, &status, 0L);
    }
  } else if (!strcmp(n, "set_mempolicy")) {
    rc = syscall(SYS_set_mempolicy, 0L /* MPOL_DEFAULT */, nullptr, 0L);
  } else if (!strcmp(n, "get_mempolicy")) {
    int mode = 0;
    rc = syscall(SYS_get_mempolicy, &mode, nullptr, 0L, nullptr, 0L);
  } else if (!strcmp(n, "migrate_pages")) {
    unsigned long nodes = 1;
    rc = syscall(SYS_migrate_pages, 0L, 64L, &nodes, &nodes);
  } else if (!strcmp(n, "personality_noaslr")) {
    rc = syscall(SYS_personality, static_cast<long>(ADDR_NO_RANDOMIZE));
  } else if (!strcmp(n, "personality_query")) {
    rc = syscall(SYS_personality, 0xffffffffL);
  } else if (!strcmp(n, "personality_linux32")) {
    rc = syscall(SYS_personality, static_cast<long>(PER_LINUX32));
  } else if (!strcmp(n, "sysfs")) {
    rc = syscall(SYS_sysfs, 3L);  // the number of filesystem types
  } else if (!strcmp(n, "ustat")) {
    struct stat st;
    stat("/", &st);
    rc = syscall(SYS_ustat, static_cast<long>(st.st_dev), buf);
  } else if (!strcmp(n, "process_madvise")) {
    long pidfd = syscall(SYS_pidfd_open, static_cast<long>(getpid()), 0L);
    rc = syscall(440 /* process_madvise */, pidfd, nullptr, 0L, 20L /* MADV_COLD */, 0L);
  } else {
    fprintf(stderr, "unknown probe %s\n", n);
    exit(2);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <syscall>...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    long rc = Try(argv[i]);
    int err = rc < 0 ? errno : 0;
    printf("%s %ld %d\n", argv[i], rc, err);
    fflush(stdout);
  }
  return 0;
}
