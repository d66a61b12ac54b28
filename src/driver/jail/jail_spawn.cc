#include "driver/jail/jail_spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sanitizer/asan_interface.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace hutch::jail {

namespace {

enum Step : uint32_t {
  kStepJoinCgroup = 1,
  kStepNetNs,
  kStepPrivateRoot,
  kStepWritableDisk,
  kStepOverlay,
  kStepVolumes,
  kStepProc,
  kStepDev,
  kStepDevNodes,
  kStepDevPts,
  kStepDevShm,
  kStepSys,
  kStepMaskProc,
  kStepHostname,
  kStepLoopback,
  kStepAgentSocket,
  kStepPivotRoot,
  kStepWaitCgroup,
  kStepCgroupNs,
  kStepUserNs,
  kStepWaitMaps,
  kStepSetIds,
  kStepNoNewPrivs,
  kStepCapabilities,
  kStepRlimits,
  kStepFds,
  kStepSeccomp,
  kStepExecAgent,
  kStepCount,
};

constexpr const char* kStepNames[] = {
    "none",
    "join cgroups",
    "enter network namespace",
    "make / private",
    "mount writable disk",
    "mount overlay",
    "mount volumes",
    "mount /proc",
    "mount /dev",
    "bind device nodes",
    "mount /dev/pts",
    "mount /dev/shm",
    "mount /sys",
    "mask /proc paths",
    "set hostname",
    "bring up loopback",
    "bind agent socket",
    "pivot_root",
    "wait for cgroups",
    "unshare cgroup ns",
    "unshare user ns",
    "wait for uid maps",
    "set ids",
    "no_new_privs",
    "drop capabilities",
    "rlimits",
    "arrange fds",
    "install seccomp",
    "exec agent",
};

struct Report {
  uint32_t step;
  int32_t err;
};

// The child's first report, as soon as it runs: the parent learns its pid
// from it (CLONE_PARENT_SETTID wrote the pid before the child ran).
constexpr uint32_t kStarted = 0xffffffffU;
// The child built its root and waits to be in its cgroups before it
// enters its cgroup namespace (rooted where it then is).
constexpr uint32_t kCgroupGate = 0xfffffffeU;

// Everything the child needs, formatted before clone().
struct Plan {
  const JailConfig* cfg;
  std::string root, scratch, upper, work, overlay_opts;
  std::string proc, dev, dev_opts, devpts, devpts_opts, devshm, devshm_opts, sys, dev_ptmx;
  std::vector<std::string> dev_nodes_src, dev_nodes_dst;
  std::vector<std::array<std::string, 2>> dev_links;  // {target, linkpath}
  std::vector<std::string> proc_masked_files, proc_ro_dirs, proc_masked_dirs;
  // The sandbox's own /proc/sys/kernel/random/boot_id: text, file in the
  // scratch tmpfs, and the path it is bound over.
  std::string boot_id, boot_id_src, boot_id_dst;
  // Per bind: the mount point's path components under the root.
  std::vector<std::vector<std::string>> bind_components;
  std::string dev_null_in_root;
  int sync_fd = -1;
  int parent_sync_fd = -1;  // the parent's end, which the child must not hold
  int log_fd = -1;
};

[[noreturn]] void Fail(int fd, uint32_t step, int err) {
  Report r{step, err};
  // Best effort: the parent treats a short read as an unknown failure.
  [[maybe_unused]] ssize_t n = write(fd, &r, sizeof r);
  _exit(126);
}

// Capabilities a sandbox's root never needs; dropped from the bounding set
// so nothing inside can regain them, even through a setuid-root binary.
constexpr int kDroppedCaps[] = {
    CAP_SYS_ADMIN,     CAP_SYS_MODULE,   CAP_SYS_PTRACE,      CAP_SYS_BOOT,
    CAP_SYS_TIME,      CAP_SYS_RAWIO,    CAP_MKNOD,           CAP_SYSLOG,
    CAP_MAC_ADMIN,     CAP_MAC_OVERRIDE, CAP_AUDIT_CONTROL,   CAP_AUDIT_READ,
    CAP_AUDIT_WRITE,   CAP_BPF,          CAP_PERFMON,         CAP_CHECKPOINT_RESTORE,
    CAP_NET_ADMIN,     CAP_SYS_PACCT,    CAP_SYS_TTY_CONFIG,  CAP_WAKE_ALARM,
    CAP_BLOCK_SUSPEND, CAP_LEASE,        CAP_LINUX_IMMUTABLE, CAP_SYS_NICE,
    CAP_SYS_RESOURCE,  CAP_IPC_LOCK,
};

// RLIMIT_NOFILE of every process in a sandbox (docs/security.md).
constexpr rlim_t kSandboxNofile = 4096;

bool Exists(const char* p) {
  struct stat st;
  return lstat(p, &st) == 0;
}

// A random (version 4) UUID as the kernel prints boot_id, with its newline.
Result<std::string> RandomUuid() {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return ErrnoError("getrandom");
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b[i] >> 4];
    out += kHex[b[i] & 15];
  }
  return out + "\n";
}

// Binds a volume at its mount point inside the new root. The root's
// directories come from the template and from snapshot layers that a
// sandbox wrote, so any of them may be a planted symlink: each component is
// opened with O_NOFOLLOW relative to its parent (a symlink fails the create
// instead of sending the mkdir or the mount to a host path), and missing
// ones are created owned by the sandbox's root. The mount is attached to
// the final directory by fd (move_mount), never by path.
void BindVolume(const Plan& p, const JailBind& b, const std::vector<std::string>& comps) {
  const JailConfig& c = *p.cfg;
  const int sfd = p.sync_fd;
  int dir = open(p.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) Fail(sfd, kStepVolumes, errno);
  for (const auto& comp : comps) {
    int next = openat(dir, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (mkdirat(dir, comp.c_str(), 0755) != 0 && errno != EEXIST) Fail(sfd, kStepVolumes, errno);
      if (fchownat(dir, comp.c_str(), c.uid_base, c.uid_base, AT_SYMLINK_NOFOLLOW) != 0)
        Fail(sfd, kStepVolumes, errno);
      next = openat(dir, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) Fail(sfd, kStepVolumes, errno);
    close(dir);
    dir = next;
  }
  int tree = open_tree(AT_FDCWD, b.host_dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) Fail(sfd, kStepVolumes, errno);
  struct mount_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.read_only ? MOUNT_ATTR_RDONLY : 0);
  if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    Fail(sfd, kStepVolumes, errno);
  if (move_mount(tree, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    Fail(sfd, kStepVolumes, errno);
  close(tree);
  close(dir);
}

// The child's steps, in the order ChildMain runs them. Each one runs between
// clone() and exec: raw syscalls only (async-signal-safe, no allocation),
// and a failure goes to the parent as {step, errno} through Fail().

// Holding the parent's end too would keep our reads from ever seeing EOF
// if hutchd dies mid-setup: this child would then wait forever, holding
// copies of every hutchd fd (client sockets, the state dir lock).
void DropParentEnd(const Plan& p) { close(p.parent_sync_fd); }

// On cgroup v1 the child moves itself into its cgroups, first thing, so
// its setup is the sandbox's: "0" into each hierarchy's `tasks`, through
// files hutchd opened (Cgroup::OpenSelfAttach). Moving only itself, it
// skips the kernel's global thread-group lock, which a parent writing the
// pid takes: that writer waits for an RCU grace period and holds off every
// fork on the host meanwhile (3-20 ms under load here, against ~0.03 ms).
void JoinOwnCgroups(const Plan& p) {
  for (int fd : p.cfg->cgroup_tasks_fds)
    if (write(fd, "0", 1) != 1) Fail(p.sync_fd, kStepJoinCgroup, errno);
}

// A sandbox with a network joins the namespace hutchd prepared (its
// veth and routes already set, owned by the host's user namespace, so
// the sandbox's root cannot change them); before anything is mounted, so
// /sys below shows this namespace's interfaces.
void JoinNetworkNamespace(const Plan& p) {
  const JailConfig& c = *p.cfg;
  if (c.netns_fd >= 0 && setns(c.netns_fd, CLONE_NEWNET) != 0) Fail(p.sync_fd, kStepNetNs, errno);
}

// The root: the template's layers under a writable upper layer.
void MountWritableRoot(const Plan& p) {
  const JailConfig& c = *p.cfg;
  const int sfd = p.sync_fd;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    Fail(sfd, kStepPrivateRoot, errno);
  // The writable layer lives on the sandbox's own ext4 disk: its size is
  // the disk quota (ENOSPC past it), and its page cache, unlike a tmpfs's
  // pages, can be written back and reclaimed, so filling the disk never
  // fills the sandbox's memory cgroup. hutchd mounted it ahead (detached,
  // with upper/ and work/ made: disk_pool's PrepareWritableLayer); it is
  // moved into this mount namespace only, and vanishes with the sandbox.
  if (move_mount(c.disk_mount_fd, "", AT_FDCWD, p.scratch.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    Fail(sfd, kStepWritableDisk, errno);
  if (mount("overlay", p.root.c_str(), "overlay", MS_NOSUID, p.overlay_opts.c_str()) != 0)
    Fail(sfd, kStepOverlay, errno);
}

void MountVolumes(const Plan& p) {
  const JailConfig& c = *p.cfg;
  for (size_t i = 0; i < c.binds.size(); ++i) BindVolume(p, c.binds[i], p.bind_components[i]);
}

// We are PID 1 of the new pid namespace: this /proc shows only the sandbox.
void MountProc(const Plan& p) {
  if (mount("proc", p.proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    Fail(p.sync_fd, kStepProc, errno);
}

// A small /dev of our own: a few device nodes bound from the host's, the
// usual links, a private devpts and /dev/shm; then read-only.
void MountDev(const Plan& p) {
  const int sfd = p.sync_fd;
  if (mount("tmpfs", p.dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, p.dev_opts.c_str()) != 0)
    Fail(sfd, kStepDev, errno);
  for (size_t i = 0; i < p.dev_nodes_src.size(); ++i) {
    int fd = open(p.dev_nodes_dst[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) Fail(sfd, kStepDevNodes, errno);
    close(fd);
    if (mount(p.dev_nodes_src[i].c_str(), p.dev_nodes_dst[i].c_str(), nullptr, MS_BIND, nullptr) !=
        0)
      Fail(sfd, kStepDevNodes, errno);
  }
  for (const auto& l : p.dev_links) {
    if (symlink(l[0].c_str(), l[1].c_str()) != 0) Fail(sfd, kStepDevNodes, errno);
  }
  if (mkdir(p.devpts.c_str(), 0755) != 0) Fail(sfd, kStepDevPts, errno);
  if (mount("devpts", p.devpts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC, p.devpts_opts.c_str()) !=
      0)
    Fail(sfd, kStepDevPts, errno);
  if (mkdir(p.devshm.c_str(), 01777) != 0) Fail(sfd, kStepDevShm, errno);
  if (mount("tmpfs", p.devshm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, p.devshm_opts.c_str()) != 0)
    Fail(sfd, kStepDevShm, errno);
  // /dev itself read-only: nothing inside can add entries to it.
  if (mount(nullptr, p.dev.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
            p.dev_opts.c_str()) != 0)
    Fail(sfd, kStepDev, errno);
}

// An empty read-only /sys: no kernel knobs, no host device topology.
void MountEmptySys(const Plan& p) {
  if (mount("tmpfs", p.sys.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=4k,nr_inodes=8,mode=0555") != 0)
    Fail(p.sync_fd, kStepSys, errno);
}

// /proc entries that leak host state or poke the host kernel.
void MaskProcEntries(const Plan& p) {
  const int sfd = p.sync_fd;
  for (const auto& f : p.proc_masked_files) {
    if (!Exists(f.c_str())) continue;
    if (mount(p.dev_null_in_root.c_str(), f.c_str(), nullptr, MS_BIND, nullptr) != 0)
      Fail(sfd, kStepMaskProc, errno);
  }
  for (const auto& d : p.proc_masked_dirs) {
    if (!Exists(d.c_str())) continue;
    if (mount("tmpfs", d.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=0,nr_inodes=1") != 0)
      Fail(sfd, kStepMaskProc, errno);
  }
}

// boot_id is the host kernel's: every sandbox, and two forks of one
// snapshot, would read the same id, and it names the host's boot. Each
// sandbox reads its own from a file in its scratch tmpfs (out of reach
// once pivot_root hides the scratch; owned by the host's root, so the
// sandbox's root cannot write it either). Bound before /proc/sys turns
// read-only; the recursive bind of MakeProcDirsReadOnly carries it along.
void BindOwnBootId(const Plan& p) {
  const int sfd = p.sync_fd;
  if (!Exists(p.boot_id_dst.c_str())) return;
  int fd = open(p.boot_id_src.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
  if (fd < 0) Fail(sfd, kStepMaskProc, errno);
  if (write(fd, p.boot_id.data(), p.boot_id.size()) != static_cast<ssize_t>(p.boot_id.size()))
    Fail(sfd, kStepMaskProc, errno ? errno : EIO);
  close(fd);
  if (mount(p.boot_id_src.c_str(), p.boot_id_dst.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      mount(nullptr, p.boot_id_dst.c_str(), nullptr,
            MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    Fail(sfd, kStepMaskProc, errno);
}

void MakeProcDirsReadOnly(const Plan& p) {
  for (const auto& d : p.proc_ro_dirs) {
    if (!Exists(d.c_str())) continue;
    if (mount(d.c_str(), d.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        mount(nullptr, d.c_str(), nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      Fail(p.sync_fd, kStepMaskProc, errno);
  }
}

// The writable layer stays reachable for the host (snapshots, fork)
// through the agent's fd 4, after pivot_root hides every path to it.
int OpenWritableLayer(const Plan& p) {
  int scratch_fd = open(p.scratch.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (scratch_fd < 0) Fail(p.sync_fd, kStepFds, errno);
  return scratch_fd;
}

void SetHostname(const Plan& p) {
  const JailConfig& c = *p.cfg;
  if (sethostname(c.hostname.data(), c.hostname.size()) != 0) Fail(p.sync_fd, kStepHostname, errno);
}

// The sandbox's memory-cgroup OOM killer should pick a runaway command,
// never the agent (PID 1: losing it ends the sandbox). Needs the host's
// root, so it is set here, before the user namespace; the agent starts its
// commands 500 above its own value (agent/spawn.cc).
// Best effort: lowering the score needs CAP_SYS_RESOURCE, which some
// hosts (this CI's VMs among them) withhold even from root; hutchd logs
// that once (JailDriver::CheckOomShield).
void ShieldAgentFromOomKiller() {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    // -999, not -1000: root writing a value also sets the floor its
    // descendants may lower themselves to, and -1000 would let any
    // command make itself immune to the OOM killer.
    [[maybe_unused]] ssize_t n = write(fd, "-999", 4);
    close(fd);
  }
}

// A new net namespace has only `lo`, and it starts down.
void BringUpLoopback(const Plan& p) {
  const int sfd = p.sync_fd;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Fail(sfd, kStepLoopback, errno);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, "lo", 3);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Fail(sfd, kStepLoopback, errno);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Fail(sfd, kStepLoopback, errno);
  close(s);
}

// The agent's socket is bound at a host path while the host's tree is
// still reachable; after pivot_root nothing inside can name that path.
// Returns the listening socket.
int BindAgentSocket(const Plan& p) {
  const JailConfig& c = *p.cfg;
  const int sfd = p.sync_fd;
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) Fail(sfd, kStepAgentSocket, errno);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (c.agent_socket.size() >= sizeof addr.sun_path) Fail(sfd, kStepAgentSocket, ENAMETOOLONG);
  memcpy(addr.sun_path, c.agent_socket.c_str(), c.agent_socket.size() + 1);
  unlink(c.agent_socket.c_str());
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    Fail(sfd, kStepAgentSocket, errno);
  if (listen(lfd, 16) != 0) Fail(sfd, kStepAgentSocket, errno);
  return lfd;
}

// pivot_root(".", ".") stacks the old root under the new one; detaching
// it leaves only the sandbox's tree in this mount namespace.
void PivotIntoRoot(const Plan& p) {
  const int sfd = p.sync_fd;
  if (chdir(p.root.c_str()) != 0) Fail(sfd, kStepPivotRoot, errno);
  if (syscall(SYS_pivot_root, ".", ".") != 0) Fail(sfd, kStepPivotRoot, errno);
  if (umount2(".", MNT_DETACH) != 0) Fail(sfd, kStepPivotRoot, errno);
  if (chdir("/") != 0) Fail(sfd, kStepPivotRoot, errno);
}

// Without self-attach (cgroup v2), the parent places us in our cgroups
// while we build the root and lets us on once that is done; either way the
// new cgroup namespace is rooted at them. The parent writes the new user
// namespace's uid and gid maps when asked (MapIdsAndRelease).
void EnterCgroupAndUserNamespaces(const Plan& p) {
  const int sfd = p.sync_fd;
  if (p.cfg->cgroup_tasks_fds.empty()) {
    const Report gate{kCgroupGate, 0};
    if (write(sfd, &gate, sizeof gate) != sizeof gate) Fail(sfd, kStepWaitCgroup, errno);
    char joined;
    if (read(sfd, &joined, 1) != 1) Fail(sfd, kStepWaitCgroup, errno);
  }
  if (unshare(CLONE_NEWCGROUP) != 0) Fail(sfd, kStepCgroupNs, errno);
  if (unshare(CLONE_NEWUSER) != 0) Fail(sfd, kStepUserNs, errno);
  Report ask{0, 0};
  if (write(sfd, &ask, sizeof ask) != sizeof ask) Fail(sfd, kStepWaitMaps, errno);
  char b;
  if (read(sfd, &b, 1) != 1) Fail(sfd, kStepWaitMaps, errno);
}

// Raw syscalls, not glibc's wrappers: those broadcast the change to
// every thread of the process (all threads share credentials in POSIX)
// under a lock of glibc's thread list. This child is a copy of one
// thread of hutchd; if another hutchd thread was starting or ending at
// the moment of clone, that lock is held here forever and the wrapper
// never returns. The kernel's calls change this (only) thread.
void BecomeSandboxRoot(const Plan& p) {
  if (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setgroups, 0, nullptr) != 0 ||
      syscall(SYS_setresuid, 0, 0, 0) != 0)
    Fail(p.sync_fd, kStepSetIds, errno);
}

void DropPrivileges(const Plan& p) {
  const int sfd = p.sync_fd;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(sfd, kStepNoNewPrivs, errno);
  for (int cap : kDroppedCaps) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      Fail(sfd, kStepCapabilities, errno);
  }
  // A core dump with a piped core_pattern runs a host helper as host root.
  struct rlimit zero = {0, 0};
  if (setrlimit(RLIMIT_CORE, &zero) != 0) Fail(sfd, kStepRlimits, errno);
}

// What the child still holds once its fds are arranged: the sync socket
// (failures from here on are reported on it) and the agent's memfd.
struct AgentFds {
  int sync;
  int agent_memfd;
};

// fds: 0 /dev/null, 1+2 the agent log, 3 the listening socket, 4 the
// writable layer's directory (O_PATH); the sync
// socket and the memfd stay close-on-exec; everything else is closed.
AgentFds ArrangeAgentFds(const Plan& p, int lfd, int scratch_fd) {
  const JailConfig& c = *p.cfg;
  const int sfd = p.sync_fd;
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) Fail(sfd, kStepFds, errno);
  int hi_sync = fcntl(sfd, F_DUPFD_CLOEXEC, 100);
  int hi_mem = fcntl(c.agent_memfd, F_DUPFD_CLOEXEC, 100);
  int hi_log = fcntl(p.log_fd, F_DUPFD_CLOEXEC, 100);
  int hi_lfd = fcntl(lfd, F_DUPFD_CLOEXEC, 100);
  int hi_null = fcntl(devnull, F_DUPFD_CLOEXEC, 100);
  int hi_scratch = fcntl(scratch_fd, F_DUPFD_CLOEXEC, 100);
  if (hi_sync < 0 || hi_mem < 0 || hi_log < 0 || hi_lfd < 0 || hi_null < 0 || hi_scratch < 0)
    Fail(sfd, kStepFds, errno);
  if (dup2(hi_null, 0) < 0 || dup2(hi_log, 1) < 0 || dup2(hi_log, 2) < 0 || dup2(hi_lfd, 3) < 0 ||
      dup2(hi_scratch, 4) < 0)
    Fail(hi_sync, kStepFds, errno);
  // close_range over [5, hi) and (hi, ...) minus the two we still need.
  int keep_lo = hi_sync < hi_mem ? hi_sync : hi_mem;
  int keep_hi = hi_sync < hi_mem ? hi_mem : hi_sync;
  if (syscall(SYS_close_range, 5, keep_lo - 1, 0) != 0 ||
      (keep_hi - keep_lo > 1 && syscall(SYS_close_range, keep_lo + 1, keep_hi - 1, 0) != 0) ||
      syscall(SYS_close_range, keep_hi + 1, ~0U, 0) != 0)
    Fail(hi_sync, kStepFds, errno);
  return {hi_sync, hi_mem};
}

// Open files: the sandbox's own limit, not whatever hutchd was started
// with (a service manager may give hutchd a million). Soft = hard, so a
// program that raises its soft limit gets no more. Set only now: the
// fds inherited from a busy hutchd are closed, so the dups of
// ArrangeAgentFds never ran into the lower limit.
void LimitOpenFiles(const AgentFds& fds) {
  struct rlimit nofile = {kSandboxNofile, kSandboxNofile};
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) Fail(fds.sync, kStepRlimits, errno);
}

void InstallSeccomp(const Plan& p, const AgentFds& fds) {
  const JailConfig& c = *p.cfg;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, c.seccomp->program(), 0, 0) != 0)
    Fail(fds.sync, kStepSeccomp, errno);
}

[[noreturn]] void ExecAgent(const AgentFds& fds) {
  char arg0[] = "hutch-agent";
  char* argv[] = {arg0, nullptr};
  char env0[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};
  syscall(SYS_execveat, fds.agent_memfd, "", argv, envp, AT_EMPTY_PATH);
  Fail(fds.sync, kStepExecAgent, errno);
}

// The child, from clone() to exec: the steps above, top to bottom.
[[noreturn]] void ChildMain(const Plan& p) {
  const Report started{kStarted, 0};
  if (write(p.sync_fd, &started, sizeof started) != sizeof started) _exit(126);
  DropParentEnd(p);
  JoinOwnCgroups(p);
  JoinNetworkNamespace(p);
  MountWritableRoot(p);
  MountVolumes(p);
  MountProc(p);
  MountDev(p);
  MountEmptySys(p);
  MaskProcEntries(p);
  BindOwnBootId(p);
  MakeProcDirsReadOnly(p);
  const int scratch_fd = OpenWritableLayer(p);
  SetHostname(p);
  ShieldAgentFromOomKiller();
  BringUpLoopback(p);
  const int listen_fd = BindAgentSocket(p);
  PivotIntoRoot(p);
  EnterCgroupAndUserNamespaces(p);
  BecomeSandboxRoot(p);
  DropPrivileges(p);
  const AgentFds fds = ArrangeAgentFds(p, listen_fd, scratch_fd);
  LimitOpenFiles(fds);
  InstallSeccomp(p, fds);
  ExecAgent(fds);
}

// Formats everything the child needs (see Plan) from `cfg`.
Status MakePlan(const JailConfig& cfg, Plan& p) {
  p.cfg = &cfg;
  const std::string& d = cfg.sandbox_dir;
  p.root = d + "/root";
  p.scratch = d + "/scratch";
  p.upper = p.scratch + "/upper";
  p.work = p.scratch + "/work";
  std::string lowers;
  for (const auto& l : cfg.extra_lowers) lowers += l + ":";
  p.overlay_opts =
      "lowerdir=" + lowers + cfg.lower_dir + ",upperdir=" + p.upper + ",workdir=" + p.work;
  for (const auto& b : cfg.binds) {
    std::vector<std::string> comps;
    size_t start = 1;
    while (start < b.path.size()) {
      size_t end = b.path.find('/', start);
      if (end == std::string::npos) end = b.path.size();
      std::string comp = b.path.substr(start, end - start);
      if (comp.empty() || comp == "." || comp == "..")
        return MakeError(Code::kInvalidRequest, "bind path " + b.path + " is not normalized");
      comps.push_back(std::move(comp));
      start = end + 1;
    }
    if (b.path.empty() || b.path[0] != '/' || comps.empty())
      return MakeError(Code::kInvalidRequest,
                       "bind path " + b.path + " must be absolute and not /");
    p.bind_components.push_back(std::move(comps));
  }
  p.proc = p.root + "/proc";
  p.dev = p.root + "/dev";
  p.dev_opts = "size=64k,nr_inodes=64,mode=0755,uid=" + std::to_string(cfg.uid_base) +
               ",gid=" + std::to_string(cfg.uid_base);
  for (const char* n : {"null", "zero", "full", "random", "urandom", "tty"}) {
    p.dev_nodes_src.push_back(std::string("/dev/") + n);
    p.dev_nodes_dst.push_back(p.dev + "/" + n);
  }
  p.dev_links = {{"pts/ptmx", p.dev + "/ptmx"},
                 {"/proc/self/fd", p.dev + "/fd"},
                 {"/proc/self/fd/0", p.dev + "/stdin"},
                 {"/proc/self/fd/1", p.dev + "/stdout"},
                 {"/proc/self/fd/2", p.dev + "/stderr"}};
  p.devpts = p.dev + "/pts";
  p.devpts_opts = "newinstance,ptmxmode=0666,mode=0620,gid=" + std::to_string(cfg.uid_base + 5);
  p.devshm = p.dev + "/shm";
  p.devshm_opts = "size=64m,mode=1777,uid=" + std::to_string(cfg.uid_base) +
                  ",gid=" + std::to_string(cfg.uid_base);
  p.sys = p.root + "/sys";
  p.dev_null_in_root = p.dev + "/null";
  for (const char* f : {"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger",
                        "latency_stats", "kallsyms", "kmsg", "config.gz", "kpagecount",
                        "kpageflags", "kpagecgroup", "buddyinfo", "pagetypeinfo"})
    p.proc_masked_files.push_back(p.proc + "/" + f);
  for (const char* f : {"acpi", "scsi", "driver"}) p.proc_masked_dirs.push_back(p.proc + "/" + f);
  for (const char* f : {"sys", "bus", "fs", "irq"}) p.proc_ro_dirs.push_back(p.proc + "/" + f);
  auto boot_id = RandomUuid();
  if (!boot_id.ok()) return boot_id.error();
  p.boot_id = std::move(*boot_id);
  p.boot_id_src = p.scratch + "/boot_id";
  p.boot_id_dst = p.proc + "/sys/kernel/random/boot_id";

  return Status{};
}

// The child's stack: it runs on this, in hutchd's memory (CLONE_VM).
constexpr size_t kChildStackSize = 1 << 20;

// What the child uses between clone and exec, in memory it shares with
// hutchd: kept alive by the cloning thread until clone returns (the child
// exec'd or died) and by the JailChild.
struct SpawnState {
  JailConfig cfg;
  Plan plan;
  UniqueFd log;
  // The cloning thread's copy of the child's end of the sync socket,
  // closed once clone returns: with the child's own copy closed by its
  // exec (close-on-exec) or exit, the parent reads EOF.
  UniqueFd child_end;
  void* stack = MAP_FAILED;
  pid_t pid = 0;  // written by the kernel (CLONE_PARENT_SETTID) before the child runs
  std::atomic<int> clone_errno{0};
  ~SpawnState() {
    if (stack != MAP_FAILED) munmap(stack, kChildStackSize);
  }
};

int ChildEntry(void* arg) {
  const Plan& p = *static_cast<const Plan*>(arg);
  // stderr is the agent's log from here on (ArrangeAgentFds makes it so
  // for good): nothing the child's runtime may print — an ASan build warns
  // once that it does not know this stack — lands in hutchd's log.
  if (dup2(p.log_fd, 2) < 0) Fail(p.sync_fd, kStepFds, errno);
  ChildMain(p);
}

}  // namespace

const char* JailStepName(uint32_t step) {
  return step < kStepCount ? kStepNames[step] : "unknown step";
}

asio::awaitable<Result<JailChild>> SpawnJail(JailConfig config, BlockingWorker& spawner) {
  if (config.seccomp == nullptr || config.agent_memfd < 0 || config.disk_mount_fd < 0)
    co_return MakeError(Code::kInternal, "jail config lacks seccomp policy, agent binary or disk");
  auto state = std::make_shared<SpawnState>();
  state->cfg = std::move(config);
  const JailConfig& cfg = state->cfg;
  Plan& p = state->plan;
  if (auto st = MakePlan(cfg, p); !st.ok()) co_return st.error();
  state->log.reset(open(cfg.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!state->log) co_return ErrnoError("open agent log " + cfg.log_path);
  p.log_fd = state->log.get();

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    co_return ErrnoError("socketpair");
  UniqueFd parent_end(sv[0]);
  state->child_end.reset(sv[1]);
  p.sync_fd = state->child_end.get();
  p.parent_sync_fd = parent_end.get();
  // A child whose parent went quiet gives up instead of waiting forever
  // (and holding its cloning thread).
  const timeval patience{static_cast<time_t>(kChildPatience.count()), 0};
  if (setsockopt(p.sync_fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience) != 0)
    co_return ErrnoError("sync socket timeout");

  state->stack = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (state->stack == MAP_FAILED) co_return ErrnoError("child stack");
  // Under ASan: a child that _exits or execs never unpoisons its frames'
  // redzones, and a later stack mapped at the same address would inherit
  // them (no-op in other builds).
  ASAN_UNPOISON_MEMORY_REGION(state->stack, kChildStackSize);

  // CLONE_VM | CLONE_VFORK, as posix_spawn does: the child shares hutchd's
  // memory until its exec, so nothing is copied and nothing becomes
  // copy-on-write (a fork-like clone copied hutchd's page tables and made
  // every later write by any hutchd thread a page fault, with a TLB
  // shootdown across CPUs). The cloning thread sleeps until the child has
  // exec'd or died, so the child has that thread's TLS (errno) to itself;
  // it runs on a spawner thread so the I/O thread keeps serving and can
  // drive the child's setup meanwhile.
  const int flags = CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | CLONE_NEWPID | CLONE_NEWNS |
                    (cfg.netns_fd >= 0 ? 0 : CLONE_NEWNET) | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
  spawner.Post([state, flags] {
    void* top = static_cast<char*>(state->stack) + kChildStackSize;
    const int pid = clone(ChildEntry, top, flags, &state->plan, &state->pid);
    if (pid < 0) state->clone_errno = errno;
    state->child_end.reset();
  });

  // The child's first report, or EOF if it never ran.
  Report r{};
  ssize_t n = -1;
  while (n < 0) {
    if (!co_await WaitReadable(parent_end.get(), kChildPatience))
      co_return MakeError(Code::kUnavailable, "jail child did not start");
    n = read(parent_end.get(), &r, sizeof r);
    if (n < 0 && errno != EAGAIN && errno != EINTR) co_return ErrnoError("read jail child start");
  }
  if (n == 0 || r.step != kStarted) {
    const int err = state->clone_errno.load();
    if (err != 0) co_return ErrnoError("clone", err);
    co_return MakeError(Code::kInternal, "jail child exited before it started");
  }
  JailChild child;
  child.pid_ = __atomic_load_n(&state->pid, __ATOMIC_ACQUIRE);
  child.sync_ = std::move(parent_end);
  child.state_ = state;
  child.pidfd_.reset(static_cast<int>(syscall(SYS_pidfd_open, child.pid_, 0)));
  if (!child.pidfd_) {
    Error e = ErrnoError("pidfd_open");
    child.KillAndReap();
    co_return e;
  }
  co_return child;
}

namespace {

// The error a failure report stands for.
Error StepError(const Report& r) {
  Error e;
  e.code = Code::kInternal;
  e.err = r.err;
  e.message =
      std::string("sandbox setup failed at '") + JailStepName(r.step) + "': " + strerror(r.err);
  if (r.step == kStepVolumes && (r.err == ELOOP || r.err == ENOTDIR)) {
    // The request's fault, not the host's: its mount path runs through a
    // symlink or a file in the sandbox's own tree.
    e.code = Code::kInvalidRequest;
    e.message =
        "a volume's mount path goes through a symlink or a non-directory in the sandbox's files (" +
        std::string(strerror(r.err)) + ")";
  }
  return e;
}

}  // namespace

Result<uint32_t> JailChild::ReadStep() {
  Report r{};
  ssize_t n = read(sync_.get(), &r, sizeof r);
  if (n == 0) return MakeError(Code::kInternal, "jail child exited during setup");
  if (n != sizeof r) return ErrnoError("read jail report");
  if (r.step == 0 || r.step == kCgroupGate) return r.step;
  return StepError(r);
}

Status JailChild::ReadCgroupGate() {
  auto step = ReadStep();
  if (!step.ok()) return step.error();
  if (*step != kCgroupGate) return MakeError(Code::kInternal, "jail child skipped its cgroup gate");
  return {};
}

Status JailChild::ReleaseIntoCgroupNamespace() {
  char b = 'c';
  if (write(sync_.get(), &b, 1) != 1) return ErrnoError("release jail child into its cgroups");
  return {};
}

Result<bool> JailChild::ReadReport() {
  auto step = ReadStep();
  if (!step.ok()) return step.error();
  if (*step != 0) return MakeError(Code::kInternal, "jail child did not ask for its id maps");
  return true;
}

Status JailChild::MapIdsAndRelease(uint32_t uid_base, uint32_t count) {
  std::string map = "0 " + std::to_string(uid_base) + " " + std::to_string(count) + "\n";
  for (const char* f : {"uid_map", "gid_map"}) {
    std::string path = "/proc/" + std::to_string(pid_) + "/" + f;
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return ErrnoError("open " + path);
    if (write(fd.get(), map.data(), map.size()) != static_cast<ssize_t>(map.size()))
      return ErrnoError("write " + path);
  }
  char b = 'm';
  if (write(sync_.get(), &b, 1) != 1) return ErrnoError("release jail child after maps");
  return {};
}

Status JailChild::ReadExecResult() {
  Report r{};
  ssize_t n = read(sync_.get(), &r, sizeof r);
  if (n == 0) {
    // close-on-exec closed the socket: the agent runs, in memory of its
    // own; the cloning thread is done with the state too.
    state_.reset();
    return {};
  }
  if (n != sizeof r) return ErrnoError("read jail exec result");
  return StepError(r);
}

JailChild JailChild::Adopted(pid_t pid, UniqueFd pidfd) {
  JailChild c;
  c.pid_ = pid;
  c.adopted_ = true;
  c.pidfd_ = std::move(pidfd);
  return c;
}

void JailChild::KillAndReap() {
  if (adopted_) {
    // Not our child: a kill by pid could hit a recycled pid.
    pid_ = -1;
    return;
  }
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

}  // namespace hutch::jail
