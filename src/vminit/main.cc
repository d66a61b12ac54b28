// hutch-vm-init: PID 1 of a vm sandbox until it becomes hutch-agent.
//
// The guest kernel unpacks two concatenated cpio archives as its initramfs:
// the modules scripts/vm-guest took from Debian's cloud kernel (with
// /modules.load, their load order) and hutchd's own (this program at /init
// and /hutch-agent). This program, in order: mounts /dev, /proc and /sys;
// loads the modules (virtio PCI, disks, serial ports, net, overlay); waits
// for the two disks the vm driver attaches — vda, the template's read-only
// ext4 image shared by every sandbox of the template, and vdb, the
// sandbox's own writable ext4 disk — and stacks them as an overlay (upper
// and work dirs on vdb), so a sandbox never needs a copy of its template;
// moves into that root; sets the hostname (the sandbox id, from the kernel
// command line `hutch.id=`), brings up loopback (and eth0, when the
// sandbox has a network: `hutch.net=1`), puts itself (so the agent
// and every command) in a pids-limited cgroup, raises its own priority
// (nice -10, the agent's; commands start at 0), closes module loading,
// kexec and ptrace (kernel.modules_disabled, kernel.kexec_load_disabled,
// kernel.yama.ptrace_scope=3) and execs hutch-agent,
// kept open from the initramfs, on the virtio-serial port named
// `hutch.agent`.
//
// Any failure is printed on the console (the sandbox's console.log on the
// host) and powers the guest off, so QEMU exits and the host sees it.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

constexpr const char* kPortName = "hutch.agent";
// Open files of every process in a sandbox (the jail driver's figure).
constexpr rlim_t kSandboxNofile = 4096;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "hutch-vm-init: %s: %s\n", what.c_str(), std::strerror(errno));
  sync();
  reboot(RB_POWER_OFF);
  _exit(1);
}

void MountOrDie(const char* src, const char* dst, const char* type, unsigned long flags,
                const char* data) {
  mkdir(dst, 0755);
  if (mount(src, dst, type, flags, data) != 0) Die(std::string("mount ") + type + " on " + dst);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Value of `key=` on the kernel command line, or "".
std::string CmdlineValue(const std::string& cmdline, const std::string& key) {
  std::istringstream in(cmdline);
  std::string word;
  while (in >> word)
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  return "";
}

void LoadModules() {
  std::ifstream list("/modules.load");
  std::string path;
  while (std::getline(list, path)) {
    if (path.empty()) continue;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die("open " + path);
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) Die("load module " + path);
    close(fd);
  }
}

// Device nodes appear in devtmpfs as the drivers probe, asynchronously.
void WaitFor(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    if (access(path.c_str(), F_OK) == 0) return;
    usleep(5000);
  }
  errno = ETIMEDOUT;
  Die("wait for " + path);
}

// /dev/vportNpM of the port QEMU named `name` (no udev here to make the
// /dev/virtio-ports/<name> link).
std::string FindPort(const std::string& name) {
  for (int i = 0; i < 2000; ++i) {
    if (DIR* d = opendir("/sys/class/virtio-ports")) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string n = ReadFile(std::string("/sys/class/virtio-ports/") + e->d_name + "/name");
        while (!n.empty() && n.back() == '\n') n.pop_back();
        if (n == name) {
          std::string dev = std::string("/dev/") + e->d_name;
          closedir(d);
          WaitFor(dev);
          return dev;
        }
      }
      closedir(d);
    }
    usleep(5000);
  }
  errno = ENOENT;
  Die("find virtio port " + name);
}

// Closes a door of the guest kernel for good (these sysctls cannot be
// lowered until the next boot). A kernel built without the feature has no
// file, and nothing to close.
void LockSysctl(const char* path, const char* value) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return;
  const ssize_t len = static_cast<ssize_t>(std::strlen(value));
  if (fd < 0 || write(fd, value, static_cast<size_t>(len)) != len)
    Die(std::string("write ") + path);
  close(fd);
}

void WriteOrDie(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    Die("write " + path);
  close(fd);
}

// Every process of the sandbox, the agent included, goes into one
// pids-limited cgroup, as in the jail: a fork bomb meets the limit (the
// agent's own fork then fails and it answers "resource exhausted")
// instead of filling the guest until nothing in it answers. The limit is
// `hutch.pids=` on the kernel command line, else the jail's default.
void LimitPids(const std::string& cmdline) {
  std::string n = CmdlineValue(cmdline, "hutch.pids");
  if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) n = "512";
  MountOrDie("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  WriteOrDie("/sys/fs/cgroup/cgroup.subtree_control", "+pids");
  mkdir("/sys/fs/cgroup/sandbox", 0755);
  WriteOrDie("/sys/fs/cgroup/sandbox/pids.max", n);
  WriteOrDie("/sys/fs/cgroup/sandbox/cgroup.procs", "0");
}

void LoopbackUp() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Die("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Die("get lo flags");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Die("bring up lo");
  close(s);
}

void SetAddr(sockaddr* sa, const char* ip) {
  auto* in = reinterpret_cast<sockaddr_in*>(sa);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &in->sin_addr);
}

// A sandbox with a network (`hutch.net=1`) has one virtio NIC, eth0, on a
// tap in its network slot. Its addresses are the same in every guest
// (src/driver/vm/guest_network.h): 192.0.0.2/30, the gateway and resolver
// 192.0.0.1, which the slot's namespace routes, masquerades and forwards
// to the slot's DNS server. Nothing here depends on the slot, so a
// snapshot of this guest works in any.
void NetworkUp() {
  for (int i = 0; i < 2000 && access("/sys/class/net/eth0", F_OK) != 0; ++i) usleep(5000);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) Die("socket");
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "eth0", IFNAMSIZ - 1);
  SetAddr(&ifr.ifr_addr, "192.0.0.2");
  if (ioctl(s, SIOCSIFADDR, &ifr) != 0) Die("set eth0 address");
  SetAddr(&ifr.ifr_netmask, "255.255.255.252");
  if (ioctl(s, SIOCSIFNETMASK, &ifr) != 0) Die("set eth0 netmask");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Die("get eth0 flags");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Die("bring up eth0");
  rtentry rt{};
  SetAddr(&rt.rt_dst, "0.0.0.0");
  SetAddr(&rt.rt_genmask, "0.0.0.0");
  SetAddr(&rt.rt_gateway, "192.0.0.1");
  rt.rt_flags = RTF_UP | RTF_GATEWAY;
  if (ioctl(s, SIOCADDRT, &rt) != 0) Die("add default route");
  close(s);
  // The template's resolv.conf (often a symlink into /run) is replaced in
  // the sandbox's own disk layer, as the jail's identity layer does.
  mkdir("/etc", 0755);
  unlink("/etc/resolv.conf");
  const std::string conf = "nameserver 192.0.0.1\noptions edns0\n";
  int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, conf.data(), conf.size()) != static_cast<ssize_t>(conf.size()))
    Die("write /etc/resolv.conf");
  close(fd);
}

}  // namespace

int main() {
  mkdir("/dev", 0755);
  if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0) Die("mount /dev");
  // The kernel found no /dev/console in the archive: stdio goes there now.
  // Without O_CLOEXEC: it may land on 0-2 (PID 1 starts with none open),
  // where dup2 onto itself would leave the flag set and exec close it.
  int con = open("/dev/console", O_RDWR | O_NOCTTY);  // NOLINT(android-cloexec-open)
  if (con >= 0) {
    for (int fd = 0; fd < 3; ++fd) dup2(con, fd);
    if (con > 2) close(con);
  }
  MountOrDie("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  MountOrDie("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  LoadModules();

  const std::string cmdline = ReadFile("/proc/cmdline");
  const std::string id = CmdlineValue(cmdline, "hutch.id");

  WaitFor("/dev/vda");
  WaitFor("/dev/vdb");
  MountOrDie("/dev/vda", "/lower", "ext4", MS_RDONLY | MS_NODEV, "noload");
  MountOrDie("/dev/vdb", "/disk", "ext4", MS_NODEV, nullptr);
  mkdir("/disk/upper", 0755);
  mkdir("/disk/work", 0755);
  MountOrDie("overlay", "/newroot", "overlay", 0,
             "lowerdir=/lower,upperdir=/disk/upper,workdir=/disk/work");
  const std::string port = FindPort(kPortName);
  int agent = open("/hutch-agent", O_RDONLY | O_CLOEXEC);
  if (agent < 0) Die("open /hutch-agent");

  for (const char* m : {"dev", "proc", "sys"}) {
    std::string dst = std::string("/newroot/") + m;
    mkdir(dst.c_str(), 0755);
    if (mount((std::string("/") + m).c_str(), dst.c_str(), nullptr, MS_MOVE, nullptr) != 0)
      Die("move /" + std::string(m));
  }
  MountOrDie("devpts", "/newroot/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
             "newinstance,ptmxmode=0666,mode=0620,gid=5");
  MountOrDie("shm", "/newroot/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  // switch_root: the overlay becomes /. The initramfs stays in memory
  // beneath it (a few MB: the agent binary is executed from it).
  if (chdir("/newroot") != 0) Die("chdir /newroot");
  if (mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) Die("move root");
  if (chroot(".") != 0) Die("chroot");
  if (chdir("/") != 0) Die("chdir /");

  if (!id.empty() && sethostname(id.data(), id.size()) != 0) Die("sethostname");
  LoopbackUp();
  if (CmdlineValue(cmdline, "hutch.net") == "1") NetworkUp();
  rlimit nofile{kSandboxNofile, kSandboxNofile};
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) Die("setrlimit");
  LimitPids(cmdline);
  // The agent ahead of its commands for the guest's CPU, as it is ahead
  // of them for memory (oom_score_adj): a fork bomb or a busy loop in the
  // sandbox leaves it the slices to answer hutchd (its children start at
  // nice 0 again).
  if (setpriority(PRIO_PROCESS, 0, -10) != 0) Die("setpriority");
  // Every module the guest needs is loaded: from here the guest kernel
  // takes no new code, neither a module nor a kexec image, so root in the
  // sandbox cannot run its own code in the guest kernel (where it would
  // drive the virtual devices, QEMU's attack surface, directly).
  LockSysctl("/proc/sys/kernel/modules_disabled", "1");
  LockSysctl("/proc/sys/kernel/kexec_load_disabled", "1");
  // No ptrace at all (Yama scope 3, as the jail's seccomp filter): root in
  // the guest could otherwise attach to the agent, PID 1, and hold it
  // stopped, and with it every request hutchd sends the sandbox.
  LockSysctl("/proc/sys/kernel/yama/ptrace_scope", "3");

  char arg0[] = "hutch-agent";
  char arg1[] = "--serial";
  std::string port_arg = port;
  char* argv[] = {arg0, arg1, port_arg.data(), nullptr};
  char env0[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};
  syscall(SYS_execveat, agent, "", argv, envp, AT_EMPTY_PATH);
  Die("exec hutch-agent");
}
