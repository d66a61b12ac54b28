#include "driver/jail/jail_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/clock.h"
#include "common/ext4_image.h"
#include "common/net_dev.h"
#include "common/proc_stat.h"
#include "common/subprocess.h"
#include "driver/jail/jail_spawn.h"

namespace hutch::jail {

namespace fs = std::filesystem;

namespace {

constexpr auto kSetupTimeout = std::chrono::seconds(15);

// ext4's shutdown ioctl (linux/fs/ext4/ext4.h; not in every uapi header).
constexpr unsigned long kExt4IocShutdown = _IOR('X', 125, uint32_t);
constexpr uint32_t kExt4GoingFlagsNoLogFlush = 0x2;

// Copies the agent binary into a sealed memfd, so every sandbox execs an
// immutable image: a root inside that opens /proc/1/exe for writing finds
// no host file behind it (the runc CVE-2019-5736 class).
Result<UniqueFd> LoadAgent(const std::string& path) {
  UniqueFd src(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!src) return ErrnoError("open agent binary " + path);
  struct stat st;
  if (fstat(src.get(), &st) != 0) return ErrnoError("stat agent binary");
  UniqueFd mfd(memfd_create("hutch-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mfd) return ErrnoError("memfd_create");
  off_t off = 0;
  while (off < st.st_size) {
    ssize_t n = sendfile(mfd.get(), src.get(), &off, static_cast<size_t>(st.st_size - off));
    if (n <= 0) return ErrnoError("copy agent binary");
  }
  if (fchmod(mfd.get(), 0555) != 0) return ErrnoError("chmod agent memfd");
  if (fcntl(mfd.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
    return ErrnoError("seal agent memfd");
  return mfd;
}

// Runs `cp -a SRC/. DST` in a child process and waits for it without
// blocking the I/O thread. cp -a keeps what an overlay layer is made of:
// owners, modes, times, xattrs (trusted.overlay.* marks opaque dirs) and
// the 0/0 character devices that are whiteouts.
asio::awaitable<Status> CopyTree(const std::string& src, const std::string& dst) {
  // A named argv: GCC 12 miscompiles braced temporaries inside co_await.
  std::vector<std::string> argv = {"/bin/cp", "-a", "--reflink=auto", "--", src + "/.", dst};
  co_return co_await RunTool(argv, std::chrono::hours(1));
}

int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

Status WriteIdentityLayer(const std::string& dir, uid_t uid, const std::string& resolv_conf) {
  std::error_code ec;
  fs::create_directories(dir + "/etc", ec);
  if (ec) return MakeError(Code::kInternal, "create " + dir + "/etc: " + ec.message());
  std::ofstream(dir + "/etc/machine-id") << RandomHex(16) << "\n";
  // Overlay shows a directory with the attributes of its topmost layer:
  // these must look like the template's (root-owned, 0755).
  for (const std::string& p : {dir, dir + "/etc", dir + "/etc/machine-id"}) {
    if (chown(p.c_str(), uid, uid) != 0) return ErrnoError("chown " + p);
  }
  if (chmod((dir + "/etc").c_str(), 0755) != 0 || chmod(dir.c_str(), 0755) != 0 ||
      chmod((dir + "/etc/machine-id").c_str(), 0444) != 0)
    return ErrnoError("chmod " + dir);
  if (!resolv_conf.empty()) {
    // The sandbox's resolver is hutchd's DNS proxy on its gateway.
    const std::string p = dir + "/etc/resolv.conf";
    std::ofstream(p) << resolv_conf;
    if (chown(p.c_str(), uid, uid) != 0 || chmod(p.c_str(), 0644) != 0)
      return ErrnoError("chown " + p);
  }
  return Status{};
}

class JailInstance : public Instance, public std::enable_shared_from_this<JailInstance> {
 public:
  JailInstance(std::string id, std::string dir, JailChild child, std::unique_ptr<Cgroup> cg,
               uint64_t start_time, std::shared_ptr<BlockingWorker> kernel)
      : id_(std::move(id)),
        dir_(std::move(dir)),
        child_(std::move(child)),
        cgroup_(std::move(cg)),
        start_time_(start_time),
        kernel_(std::move(kernel)) {}
  ~JailInstance() override {
    // Destroy() is the normal path; this is the backstop so nothing leaks.
    if (!destroyed_) DestroyNow();
  }

  std::shared_ptr<AgentConnection> agent() override { return agent_; }
  // The disk size the sandbox was made with: what metrics report as its
  // limit (the file system on it has a little less room for files).
  void set_disk_limit(uint64_t bytes) { disk_limit_ = bytes; }
  std::string AdoptionFacts() const override {
    nlohmann::json j = {{"pid", pid_}, {"start_time", start_time_}};
    return j.dump();
  }
  uint64_t OomKills() override { return cgroup_ ? cgroup_->OomKills() : 0; }
  Result<InstanceStats> Stats() override {
    if (!cgroup_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
    auto s = cgroup_->Stats();
    if (!s.ok()) return s.error();
    InstanceStats out = ToInstanceStats(*s);
    // The writable layer is the sandbox's ext4 disk, mounted in its own
    // mount namespace; statfs of an overlay reports its upper layer's file
    // system, and /proc/<pid>/root reaches the sandbox's root from the host.
    const std::string proc = "/proc/" + std::to_string(pid_);
    struct statfs fs_st;
    if (statfs((proc + "/root/").c_str(), &fs_st) == 0) {
      out.disk_limit_bytes =
          disk_limit_ ? disk_limit_ : static_cast<uint64_t>(fs_st.f_blocks) * fs_st.f_bsize;
      out.disk_used_bytes = static_cast<uint64_t>(fs_st.f_blocks - fs_st.f_bfree) * fs_st.f_bsize;
    }
    // /proc/<pid>/net/dev shows the sandbox's network namespace.
    std::ifstream dev(proc + "/net/dev");
    const NetDevTotals net = SumNetDev(dev);
    out.net_rx_bytes = net.rx_bytes;
    out.net_tx_bytes = net.tx_bytes;
    return out;
  }

  Status Pause() override {
    if (!cgroup_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
    // The freezer stops every task of the cgroup, the agent included; the
    // agent connection stays open, its frames wait in the socket buffers.
    if (auto st = cgroup_->Freeze(); !st.ok()) return st.error().Context("pause");
    paused_ = true;
    return Status{};
  }
  Status Resume() override {
    if (!cgroup_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
    if (auto st = cgroup_->Thaw(); !st.ok()) return st.error().Context("resume");
    paused_ = false;
    return Status{};
  }

  asio::awaitable<Status> CaptureLayer(const std::string& dst) override {
    if (!cgroup_ || destroyed_) co_return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
    const bool was_paused = paused_;
    if (!was_paused) {
      if (auto st = Pause(); !st.ok()) co_return st.error().Context("snapshot");
    }
    // The agent holds the writable layer's directory as fd 4 (jail_spawn).
    auto st = co_await CopyTree("/proc/" + std::to_string(pid_) + "/fd/4/upper", dst);
    if (!was_paused && !destroyed_) (void)Resume();
    co_return st;
  }

  Result<UniqueFd> NetNamespace() override {
    if (destroyed_ || destroying_ || !pidfd_.valid())
      return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
    // The agent (PID 1 of the sandbox) lives in the sandbox's netns. Open
    // through /proc first, then check the pidfd still names a live process:
    // if it does, the pid was not recycled in between, so the namespace
    // opened is our agent's (the same argument as Adopt's start time).
    const std::string path = "/proc/" + std::to_string(pid_) + "/ns/net";
    UniqueFd ns(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return ErrnoError("open " + path).Context("sandbox " + id_);
    if (PidfdSendSignal(pidfd_.get(), 0) != 0)
      return MakeError(Code::kSandboxNotRunning, "sandbox agent is gone");
    return ns;
  }

  asio::awaitable<void> Destroy() override {
    if (destroyed_) co_return;
    destroying_ = true;
    auto self = shared_from_this();  // the awaits below must not outlive us
    // The sandbox's root (its overlay) and writable layer (its ext4 disk),
    // held past the agent's exit: their teardown — the overlay syncing its
    // upper layer, the ext4 unmount, the loop device's detach, a few
    // milliseconds of kernel waits — then runs when the kernel worker
    // closes these, after the delete is answered, instead of in the dying
    // agent's exit, which the delete waits for. A crash closes them too.
    HeldMounts held = HoldMounts(pid_, pidfd_.get());
    // Only a disk with much unwritten data is shut down: the shutdown
    // logs an alert (one kernel log line per delete, on the console too),
    // and a few megabytes written back at the unmount cost less.
    if (held.layer.valid() && cgroup_ && cgroup_->DirtyBytes() >= kShutDownDirtyBytes) {
      // On the kernel worker; the fd stays open while this coroutine waits.
      // (Named lambdas: GCC 12 mishandles temporaries in co_await.)
      auto shut_down = [layer = held.layer.get(), id = id_] {
        ShutDownDisk(layer, id);
        return true;
      };
      co_await kernel_->Run(std::move(shut_down));
    }
    // A frozen task acts on SIGKILL only once thawed.
    if (paused_ && cgroup_) (void)cgroup_->Thaw();
    if (agent_) agent_->Close();
    if (pidfd_.valid()) {
      // Killing PID 1 of the pid namespace kills every process in it; the
      // kernel reaps them all before PID 1 becomes waitable. The pidfd
      // names exactly our agent even if it was adopted (not our child).
      PidfdSendSignal(pidfd_.get(), SIGKILL);
      co_await WaitReadable(pidfd_.get(), std::chrono::seconds(10));
    }
    StopAndReap();
    // The cgroup's rmdirs and the directory's removal (its disk image:
    // discards on a host mounted with `discard`) on the kernel worker.
    auto remove = [cg = std::move(cgroup_), dir = dir_, id = id_]() mutable {
      RemoveLeftovers(std::move(cg), dir, id);
      return true;
    };
    co_await kernel_->Run(std::move(remove));
    kernel_->Post([held = std::move(held)]() mutable { held = HeldMounts{}; });
  }

  struct HeldMounts {
    UniqueFd root, layer;
  };
  // The agent's root and its fd 4 (the writable layer's directory), opened
  // through /proc and checked against the pidfd on both sides of the opens
  // (a recycled pid would name another process's). Empty when the agent
  // is gone.
  static HeldMounts HoldMounts(pid_t pid, int pidfd) {
    HeldMounts h;
    if (pidfd < 0 || PidfdSendSignal(pidfd, 0) != 0) return h;
    const std::string proc = "/proc/" + std::to_string(pid);
    UniqueFd root(open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd layer(open((proc + "/fd/4").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (PidfdSendSignal(pidfd, 0) != 0) return h;
    h.root = std::move(root);
    h.layer = std::move(layer);
    return h;
  }

  // The disk goes with the sandbox: what its page cache still holds need
  // not be written out, which its unmount would otherwise do first
  // (seconds for a disk full of fresh data). An ext4 shut down without a
  // log flush drops it instead. Worth it from this much unwritten data on.
  static constexpr uint64_t kShutDownDirtyBytes = 16ULL << 20;
  static void ShutDownDisk(int layer, const std::string& id) {
    uint32_t flags = kExt4GoingFlagsNoLogFlush;
    if (ioctl(layer, kExt4IocShutdown, &flags) != 0)
      spdlog::warn("sandbox={} disk_shutdown_failed err=\"{}\"", id, strerror(errno));
  }

  void StartWatch(asio::any_io_executor ex) {
    pid_ = child_.pid();
    pidfd_ = child_.TakePidfd();
    asio::co_spawn(
        ex,
        [self = shared_from_this()]() -> asio::awaitable<void> {
          bool ready = false;
          while (!ready && !self->destroyed_) {
            ready = co_await WaitReadable(self->pidfd_.get(), std::chrono::hours(24));
          }
          if (self->destroying_ || self->destroyed_) co_return;
          int st = 0;
          pid_t r = waitpid(self->child_.pid(), &st, WNOHANG);
          std::string why =
              r > 0 ? (WIFSIGNALED(st)
                           ? "agent killed by signal " + std::to_string(WTERMSIG(st))
                           : "agent exited with status " + std::to_string(WEXITSTATUS(st)))
                    : "agent process gone";
          if (r > 0) self->reaped_ = true;
          if (self->on_lost) {
            auto cb = std::move(self->on_lost);
            self->on_lost = nullptr;
            cb(why);
          }
        },
        asio::detached);
  }

  void SetAgent(std::shared_ptr<AgentConnection> conn) {
    agent_ = std::move(conn);
    std::weak_ptr<JailInstance> weak = shared_from_this();
    agent_->on_lost = [weak](const std::string& why) {
      if (auto i = weak.lock(); i && i->on_lost) {
        auto cb = std::move(i->on_lost);
        i->on_lost = nullptr;
        cb(why);
      }
    };
  }

 private:
  std::shared_ptr<AgentConnection> agent_;

  // The synchronous teardown (the destructor's backstop).
  void DestroyNow() {
    StopAndReap();
    RemoveLeftovers(std::move(cgroup_), dir_, id_);
  }

  // Marks the instance destroyed and makes sure its agent is gone and
  // reaped.
  void StopAndReap() {
    destroyed_ = true;
    on_lost = nullptr;
    if (agent_) agent_->Close();
    if (pidfd_.valid() && child_.adopted()) PidfdSendSignal(pidfd_.get(), SIGKILL);
    if (!reaped_) child_.KillAndReap();
    reaped_ = true;
  }

  // Removes the cgroup and the sandbox's directory: touches no instance
  // state, so it can run on the kernel worker.
  static void RemoveLeftovers(std::unique_ptr<Cgroup> cg, const std::string& dir,
                              const std::string& id) {
    if (cg) {
      if (auto st = cg->Remove(); !st.ok())
        spdlog::error("sandbox={} cgroup_remove_failed err=\"{}\"", id, st.error().message);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) spdlog::error("sandbox={} remove_dir_failed dir={} err=\"{}\"", id, dir, ec.message());
  }

  std::string id_;
  std::string dir_;
  JailChild child_;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::unique_ptr<Cgroup> cgroup_;
  uint64_t start_time_ = 0;
  uint64_t disk_limit_ = 0;  // spec.disk_mb in bytes (set_disk_limit)
  std::shared_ptr<BlockingWorker> kernel_;
  bool destroying_ = false;
  bool destroyed_ = false;
  bool paused_ = false;
  bool reaped_ = false;
};

}  // namespace

Result<std::unique_ptr<JailDriver>> JailDriver::Make(const JailDriverOptions& opts) {
  auto seccomp = SeccompPolicy::Build();
  if (!seccomp.ok()) return seccomp.error().Context("build seccomp policy");
  auto cg = CgroupManager::Detect();
  if (!cg.ok()) return cg.error().Context("cgroups");
  auto mfd = LoadAgent(opts.agent_path);
  if (!mfd.ok()) return mfd.error();
  std::error_code ec;
  fs::create_directories(opts.state_dir + "/sandboxes", ec);
  if (ec)
    return MakeError(Code::kInternal, "create " + opts.state_dir + "/sandboxes: " + ec.message());
  std::unique_ptr<JailDriver> d(new JailDriver(opts, std::move(seccomp).value(),
                                               std::move(cg).value(), std::move(mfd).value()));
  if (auto st = d->disks_.Reset(); !st.ok()) return st.error().Context("sandbox disk pool");
  return d;
}

void JailDriver::CheckOomShield(pid_t agent) {
  if (oom_shield_warned_) return;
  std::ifstream in("/proc/" + std::to_string(agent) + "/oom_score_adj");
  int adj = 0;
  if (!(in >> adj) || adj == -999) return;
  // The jail child, still the host's root, set -999 before exec; only a
  // host that withholds CAP_SYS_RESOURCE from root refuses it. The agent
  // then starts its commands 500 above itself instead (agent/spawn.cc).
  oom_shield_warned_ = true;
  spdlog::warn(
      "oom_shield_unavailable agent_oom_score_adj={} why=\"hutchd lacks CAP_SYS_RESOURCE: "
      "commands start at oom_score_adj 500 to stay ahead of the agent\"",
      adj);
}

asio::awaitable<Result<std::shared_ptr<Instance>>> JailDriver::Create(const InstanceSpec& spec) {
  auto ex = co_await asio::this_coro::executor;
  // Phase times for the debug log: where a slow create spent its time.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::string dir = opts_.state_dir + "/sandboxes/" + spec.id;
  std::error_code ec;
  for (const char* sub : {"/root", "/scratch"}) {
    fs::create_directories(dir + sub, ec);
    if (ec) co_return MakeError(Code::kInternal, "create " + dir + sub + ": " + ec.message());
  }
  auto fail_cleanup = [&dir]() {
    std::error_code e;
    fs::remove_all(dir, e);
  };
  // The writable layer: the disk attached and mounted (detached), which
  // these fds keep until the child moved the mount into its namespace
  // (closing them before unmounts and detaches it).
  auto disk = co_await disks_.Take(spec.disk_mb, dir + "/disk.img");
  if (!disk.ok()) {
    fail_cleanup();
    co_return disk.error();
  }
  const double disk_ms = MsSince(t0);
  const auto t_cgroup = Clock::now();

  CgroupLimits limits;
  limits.memory_bytes = spec.memory_mb * 1024 * 1024;
  limits.pids_max = spec.pids_max;
  limits.cpus = spec.cpus;
  // (Named lambdas: GCC 12 mishandles temporaries in co_await.)
  auto make_cgroup = [cgroups = cgroups_.get(), name = opts_.instance_tag + "-" + spec.id, limits] {
    return cgroups->Create(name, limits);
  };
  auto cg = co_await kernel_->Run(std::move(make_cgroup));
  if (!cg.ok()) {
    fail_cleanup();
    co_return cg.error().Context("create cgroup");
  }

  JailConfig cfg;
  cfg.sandbox_dir = dir;
  cfg.lower_dir = spec.rootfs;
  // Each sandbox's own identity, as the topmost read-only layer: a fresh
  // /etc/machine-id (a fork or a snapshot's child must not share its
  // parent's); the hostname is the sandbox id.
  if (auto st = WriteIdentityLayer(dir + "/identity", opts_.uid_base, spec.resolv_conf); !st.ok()) {
    fail_cleanup();
    co_return st.error();
  }
  cfg.extra_lowers.push_back(dir + "/identity");
  for (const auto& l : spec.layers) cfg.extra_lowers.push_back(l);
  for (const auto& m : spec.mounts) cfg.binds.push_back({m.host_dir, m.path, m.read_only});
  cfg.hostname = spec.id;
  cfg.agent_socket = dir + "/agent.sock";
  cfg.log_path = dir + "/agent.log";
  cfg.uid_base = opts_.uid_base;
  cfg.disk_mount_fd = disk->mount.get();
  cfg.seccomp = &seccomp_;
  cfg.agent_memfd = agent_memfd_.get();
  // The child inherits this fd across clone() and joins the namespace;
  // ours closes when Create returns.
  UniqueFd netns;
  if (!spec.netns_path.empty()) {
    netns.reset(open(spec.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns) {
      Error e = ErrnoError("open network namespace " + spec.netns_path);
      cg.value()->Remove().ok();
      fail_cleanup();
      co_return e;
    }
    cfg.netns_fd = netns.get();
  }
  // v1: the child moves itself into its cgroups (see OpenSelfAttach);
  // the files close when Create returns, after the child's exec.
  auto self_attach = cg.value()->OpenSelfAttach();
  if (!self_attach.ok()) {
    cg.value()->Remove().ok();
    fail_cleanup();
    co_return self_attach.error().Context("create cgroup");
  }
  for (const UniqueFd& fd : *self_attach) cfg.cgroup_tasks_fds.push_back(fd.get());
  const double cgroup_ms = MsSince(t_cgroup);
  const auto t_spawn = Clock::now();
  JailConfig spawn_cfg = cfg;  // named: GCC 12 and temporaries in co_await
  auto child = co_await SpawnJail(std::move(spawn_cfg), *spawner_);
  if (!child.ok()) {
    fail_cleanup();
    co_return child.error().Context("spawn sandbox");
  }
  JailChild& ch = child.value();
  // Any failure below kills the half-built sandbox and removes its pieces.
  auto abort = [&](Error e) -> Error {
    ch.KillAndReap();
    cg.value()->Remove().ok();
    fail_cleanup();
    return e;
  };
  // Without self-attach (v2) the child builds its root while the worker
  // puts it into its cgroups, and waits for that before it enters its
  // cgroup namespace.
  const bool attach_here = self_attach->empty();
  if (attach_here) {
    auto join = [c = cg.value().get(), pid = ch.pid()] { return c->AddProcess(pid); };
    if (auto st = co_await kernel_->Run(std::move(join)); !st.ok())
      co_return abort(st.error().Context("join cgroup"));
  }
  // A wake-up can come with nothing to read (the waiting dup shares the
  // socket's O_NONBLOCK, and under load the reactor may report a readiness
  // that is already gone — seen by bench/hutch_load as EAGAIN): poll(2)
  // says whether a report or EOF is really there; if not, wait again
  // within the same deadline.
  const auto setup_deadline = std::chrono::steady_clock::now() + kSetupTimeout;
  auto report_ready = [&]() -> asio::awaitable<bool> {
    while (std::chrono::steady_clock::now() < setup_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          setup_deadline - std::chrono::steady_clock::now());
      if (!co_await WaitReadable(ch.sync_fd(), std::max(left, std::chrono::milliseconds(1))))
        co_return false;
      pollfd p{ch.sync_fd(), POLLIN, 0};
      if (poll(&p, 1, 0) == 1) co_return true;
    }
    co_return false;
  };
  if (attach_here) {
    if (!co_await report_ready())
      co_return abort(MakeError(Code::kUnavailable, "sandbox setup timed out"));
    if (auto st = ch.ReadCgroupGate(); !st.ok()) co_return abort(st.error());
    if (auto st = ch.ReleaseIntoCgroupNamespace(); !st.ok()) co_return abort(st.error());
  }
  if (!co_await report_ready())
    co_return abort(MakeError(Code::kUnavailable, "sandbox setup timed out"));
  auto asked = ch.ReadReport();
  if (!asked.ok()) co_return abort(asked.error());
  if (auto st = ch.MapIdsAndRelease(opts_.uid_base, 65536); !st.ok()) co_return abort(st.error());
  if (!co_await report_ready())
    co_return abort(MakeError(Code::kUnavailable, "sandbox exec timed out"));
  if (auto st = ch.ReadExecResult(); !st.ok()) co_return abort(st.error());
  const double setup_ms = MsSince(t_spawn);
  const auto t_agent = Clock::now();
  // The sandbox's mount namespace holds the disk now.
  disk->mount.reset();
  disk->loop.fd.reset();
  CheckOomShield(ch.pid());

  auto start_time = ProcStartTime(ch.pid());
  if (!start_time.ok()) co_return abort(start_time.error().Context("sandbox agent"));
  auto inst = std::make_shared<JailInstance>(spec.id, dir, std::move(child).value(),
                                             std::move(cg).value(), *start_time, kernel_);
  inst->set_disk_limit(static_cast<uint64_t>(spec.disk_mb) << 20);
  // From here on `inst` owns the child, cgroup and dir: an early return
  // destroys them through its destructor.
  inst->StartWatch(ex);
  auto conn = co_await AgentConnection::Connect(cfg.agent_socket, kSetupTimeout);
  if (!conn.ok()) {
    std::string log;
    if (FILE* f = fopen(cfg.log_path.c_str(), "re")) {
      char b[512];
      size_t n = fread(b, 1, sizeof b, f);
      log.assign(b, n);
      fclose(f);
    }
    co_return conn.error().Context("sandbox agent" +
                                   (log.empty() ? std::string() : " (log: " + log + ")"));
  }
  inst->SetAgent(conn.value());
  spdlog::debug(
      "jail created id={} ms={:.2f} disk_ms={:.2f} cgroup_ms={:.2f} setup_ms={:.2f} "
      "agent_ms={:.2f}",
      spec.id, MsSince(t0), disk_ms, cgroup_ms, setup_ms, MsSince(t_agent));
  co_return std::shared_ptr<Instance>(inst);
}

asio::awaitable<Result<std::shared_ptr<Instance>>> JailDriver::Adopt(const InstanceSpec& spec,
                                                                     const std::string& facts,
                                                                     bool paused) {
  auto ex = co_await asio::this_coro::executor;
  auto j = nlohmann::json::parse(facts, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      !j.contains("start_time") || !j["start_time"].is_number_unsigned())
    co_return MakeError(Code::kInternal, "malformed adoption facts: " + facts);
  const pid_t pid = j["pid"].get<pid_t>();
  const uint64_t start_time = j["start_time"].get<uint64_t>();
  // Open the pidfd first, then check the start time: if the pid was
  // recycled between the two, the start time differs and we let go.
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd)
    co_return MakeError(Code::kNotFound, "agent process " + std::to_string(pid) + " is gone");
  auto now_start = ProcStartTime(pid);
  if (!now_start.ok() || *now_start != start_time)
    co_return MakeError(Code::kNotFound,
                        "agent process " + std::to_string(pid) + " is gone (pid reused)");
  auto cg = cgroups_->Open(opts_.instance_tag + "-" + spec.id);
  if (!cg.ok()) co_return cg.error().Context("adopt");
  // A sandbox that should run but was left frozen (hutchd died during a
  // pause or resume) is thawed so its agent can answer.
  if (!paused) (void)cg.value()->Thaw();
  const std::string dir = opts_.state_dir + "/sandboxes/" + spec.id;
  auto inst =
      std::make_shared<JailInstance>(spec.id, dir, JailChild::Adopted(pid, std::move(pidfd)),
                                     std::move(cg).value(), start_time, kernel_);
  inst->set_disk_limit(static_cast<uint64_t>(spec.disk_mb) << 20);
  // From here `inst` owns the sandbox: failing to reach its agent destroys
  // it (its destructor kills the cgroup and removes the dir).
  inst->StartWatch(ex);
  auto conn =
      co_await AgentConnection::Connect(dir + "/agent.sock", std::chrono::seconds(5), !paused);
  if (!conn.ok()) co_return conn.error().Context("adopt: sandbox agent");
  inst->SetAgent(conn.value());
  if (paused) {
    if (auto st = inst->Pause(); !st.ok()) co_return st.error().Context("adopt paused");
  }
  co_return std::shared_ptr<Instance>(inst);
}

int JailDriver::ReconcileAtStart(const std::set<std::string>& keep) {
  // Whatever an earlier run of this state dir left and nobody adopted is
  // killed and removed. Cgroup names carry this server's tag, so servers
  // with other state dirs on the same host are left alone.
  int removed = 0;
  const std::string prefix = opts_.instance_tag + "-";
  for (const std::string& name : cgroups_->ListExisting()) {
    if (name.rfind(prefix, 0) != 0 || keep.count(name.substr(prefix.size()))) continue;
    if (auto st = cgroups_->RemoveExisting(name); !st.ok())
      spdlog::error("reconcile cgroup={} err=\"{}\"", name, st.error().message);
    ++removed;
  }
  // The loop devices of the disks of sandboxes that are gone: each
  // detaches itself once its sandbox's mounts are gone (auto-clear), and
  // the processes holding those just went with their cgroups; detaching
  // here is the backstop for any still attached (a mount namespace that
  // outlived its sandbox gets its device detached when it ends).
  std::error_code cec;
  const std::string sandboxes =
      fs::weakly_canonical(opts_.state_dir + "/sandboxes", cec).string() + "/";
  for (const LoopBacking& loop : LoopDevicesBackedUnder(sandboxes)) {
    const std::string& b = loop.backing_file;
    const std::string id =
        b.substr(sandboxes.size(), b.find('/', sandboxes.size()) - sandboxes.size());
    if (keep.count(id)) continue;
    if (auto st = DetachLoopDevice(loop.device); !st.ok())
      spdlog::error("reconcile loop={} err=\"{}\"", loop.device, st.error().message);
    else spdlog::info("reconcile loop={} sandbox={} detached", loop.device, id);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opts_.state_dir + "/sandboxes", ec)) {
    if (keep.count(e.path().filename().string())) continue;
    std::error_code rec;
    fs::remove_all(e.path(), rec);
    if (rec) spdlog::error("reconcile dir={} err=\"{}\"", e.path().string(), rec.message());
  }
  return removed;
}

}  // namespace hutch::jail
