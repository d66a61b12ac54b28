#include "driver/vm/vm_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/proc_stat.h"
#include "common/subprocess.h"
#include "driver/vm/boot_snapshots.h"
#include "driver/vm/guest_network.h"
#include "driver/vm/qemu_command.h"
#include "driver/vm/qemu_process.h"
#include "driver/vm/qmp_client.h"
#include "driver/vm/vm_instance.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return MakeError(Code::kInternal, "create " + path + ": " + ec.message());
  if (chmod(path.c_str(), mode) != 0) return ErrnoError("chmod " + path);
  return Status{};
}

Status Link(const std::string& src, const std::string& dst) {
  if (link(src.c_str(), dst.c_str()) != 0)
    return ErrnoError("link " + src + " into the sandbox dir");
  return Status{};
}

asio::awaitable<void> Sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// Kills the QEMU named by a pid file (pid and start time) if that process
// still runs; never by name.
void KillRecorded(const std::string& pidfile) {
  std::ifstream in(pidfile);
  pid_t pid = -1;
  uint64_t start = 0;
  if (!(in >> pid >> start) || pid <= 1) return;
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) return;
  auto now_start = ProcStartTime(pid);
  if (!now_start.ok() || *now_start != start) return;  // another process has the pid now
  syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  pollfd p{pidfd.get(), POLLIN, 0};
  poll(&p, 1, 5000);
  spdlog::info("reconcile killed_qemu pid={}", pid);
}

}  // namespace

VmDriver::VmDriver(VmDriverOptions opts, std::string kernel_release, AccelChoice accel,
                   std::unique_ptr<jail::CgroupManager> cg, uid_t uid, gid_t gid,
                   std::string guest_identity)
    : opts_(std::move(opts)),
      vm_dir_(opts_.state_dir + "/vm"),
      kernel_release_(std::move(kernel_release)),
      accel_(std::move(accel)),
      cgroups_(std::move(cg)),
      images_(vm_dir_ + "/images", opts_.uid_base),
      uid_(uid),
      gid_(gid),
      guest_identity_(std::move(guest_identity)) {}

Result<std::unique_ptr<VmDriver>> VmDriver::Make(const VmDriverOptions& opts) {
  if (access(opts.qemu.c_str(), X_OK) != 0)
    return ErrnoError("qemu " + opts.qemu + " (package qemu-system-x86)");
  const std::string vm_dir = opts.state_dir + "/vm";
  for (const auto& [d, mode] : {std::pair<std::string, mode_t>{vm_dir, 0700},
                                {vm_dir + "/images", 0700},
                                {vm_dir + "/sandboxes", 0700},
                                {vm_dir + "/pids", 0700},
                                {vm_dir + "/snapshots", 0700},
                                {vm_dir + "/forks", 0700}}) {
    if (auto st = MakeDir(d, mode); !st.ok()) return st.error();
  }
  std::string release;
  if (!(std::ifstream(opts.guest_dir + "/kernel-release") >> release) ||
      access((opts.guest_dir + "/vmlinux").c_str(), R_OK) != 0)
    return MakeError(Code::kNotFound, "no guest kernel in " + opts.guest_dir +
                                          " (scripts/vm-guest " + opts.guest_dir + " makes it)");
  for (const std::string& bin : {opts.init_path, opts.agent_path})
    if (access(bin.c_str(), R_OK) != 0) return ErrnoError(bin);
  auto cg = jail::CgroupManager::Detect();
  if (!cg.ok()) return cg.error().Context("cgroups");
  std::string user = opts.user;
  if (user.empty()) user = getpwnam("hutch-vm") ? "hutch-vm" : "nobody";
  passwd* pw = getpwnam(user.c_str());
  if (!pw) return MakeError(Code::kInvalidRequest, "vm user " + user + " does not exist");
  if (pw->pw_uid == 0) return MakeError(Code::kInvalidRequest, "the vm user must not be root");
  auto accel = ChooseAccel(opts.accel);
  // What every boot snapshot of this run is made of (reconcile removes the
  // snapshots of any other).
  auto identity = GuestIdentity(opts.guest_dir, opts.init_path, opts.agent_path, opts.qemu);
  if (!identity.ok()) return identity.error().Context("vm guest identity");
  spdlog::info("vm_driver kernel={} accel=\"{}\" user={} boot_snapshots={}", release, accel.why,
               user, opts.boot_snapshots);
  return std::unique_ptr<VmDriver>(new VmDriver(opts, release, accel, std::move(cg).value(),
                                                pw->pw_uid, pw->pw_gid,
                                                std::move(identity).value()));
}

Result<const GuestFiles*> VmDriver::Guest() {
  if (!guest_) {
    auto g = PrepareGuestFiles(opts_.guest_dir, vm_dir_, opts_.init_path, opts_.agent_path);
    if (!g.ok()) return g.error();
    guest_ = std::move(g).value();
  }
  return &*guest_;
}

QemuConfig VmDriver::BaseConfig(const InstanceSpec& spec) const {
  QemuConfig qc;
  qc.qemu = opts_.qemu;
  qc.sandbox_id = spec.id;
  qc.accel = accel_.accel;
  qc.vcpus = std::max(1, static_cast<int>(std::ceil(spec.cpus)));
  qc.memory_mb = spec.memory_mb;
  return qc;
}

asio::awaitable<Result<std::shared_ptr<Instance>>> VmDriver::Create(const InstanceSpec& spec) {
  if (!spec.mounts.empty())
    co_return MakeError(Code::kNotSupported, "vm sandboxes cannot mount volumes yet");
  auto guest = Guest();
  if (!guest.ok()) co_return guest.error().Context("vm guest files");

  // Layers (a built template's, a file snapshot's) are flattened into the
  // one read-only image; the guest sees the stack as a jail sandbox would.
  auto rootfs = co_await images_.RootfsImage(spec.rootfs, spec.layers);
  if (!rootfs.ok()) co_return rootfs.error().Context("vm root image");
  auto blank = co_await images_.BlankDisk(spec.disk_mb);
  if (!blank.ok()) co_return blank.error().Context("vm disk");

  if (spec.machine) co_return co_await RestoreFork(spec, *rootfs, *blank);
  if (opts_.boot_snapshots) {
    auto snap = co_await BootSnapshot(spec, *rootfs, *blank);
    if (snap.ok()) {
      auto inst = co_await Restore(spec, *rootfs, *blank, **snap);
      if (inst.ok()) co_return inst;
      spdlog::warn("sandbox={} vm_restore_failed err=\"{}\" (booting instead)", spec.id,
                   inst.error().message);
    }
  }
  co_return co_await CreateCold(spec, *rootfs, *blank);
}

asio::awaitable<Result<std::shared_ptr<VmInstance>>> VmDriver::Launch(const InstanceSpec& spec,
                                                                      LaunchPlan plan) {
  auto ex = co_await asio::this_coro::executor;
  auto guest = Guest();
  if (!guest.ok()) co_return guest.error().Context("vm guest files");
  const std::string dir = SandboxDir(spec.id);
  auto cleanup = [&]() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  };
  if (auto st = MakeDir(dir, 0700); !st.ok()) co_return st.error();
  // Everything QEMU opens is in its directory: the shared read-only files
  // as hard links (same filesystem, nothing copied).
  plan.links.insert(plan.links.begin(),
                    {{(*guest)->kernel, kKernelFile}, {(*guest)->initrd, kInitrdFile}});
  for (const auto& [src, name] : plan.links) {
    if (auto st = Link(src, dir + "/" + name); !st.ok()) {
      cleanup();
      co_return st.error();
    }
  }
  if (auto st = co_await DiskImages::CreateOverlay(dir, plan.backing, plan.backing_format);
      !st.ok()) {
    cleanup();
    co_return st.error().Context("vm disk overlay");
  }
  // The directory and the writable disk belong to the vm user; the linked
  // files stay root's and read-only.
  if (chown(dir.c_str(), uid_, gid_) != 0 ||
      chown((dir + "/" + kDiskFile).c_str(), uid_, gid_) != 0) {
    Error e = ErrnoError("chown vm sandbox dir");
    cleanup();
    co_return e;
  }

  // The guest's NIC: a tap in the sandbox's network slot, that namespace
  // made its router (guest_network.h); a NIC with nothing behind it for a
  // VM that has one only to match its boot snapshot (a base VM). Nothing
  // here outlives a failure: the tap goes with its fd, the slot's rules
  // with the slot.
  UniqueFd tap;
  if (plan.nic) {
    if (!spec.netns_path.empty()) {
      if (auto st = co_await ApplyGuestRules(spec.netns_path, spec.gateway); !st.ok()) {
        cleanup();
        co_return st.error().Context("vm " + spec.id);
      }
    }
    auto t = OpenGuestTap(spec.netns_path);
    if (!t.ok()) {
      cleanup();
      co_return t.error().Context("vm " + spec.id);
    }
    tap = std::move(t).value();
    plan.qemu.tap_fd = 3 + static_cast<int>(plan.pass_fds.size());
    plan.pass_fds.push_back(tap.get());
  }

  jail::CgroupLimits limits;
  limits.memory_bytes = (spec.memory_mb + kQemuOverheadMb) * 1024 * 1024;
  limits.pids_max = 256;  // QEMU's threads: vCPUs, I/O workers, RCU
  limits.cpus = spec.cpus;
  auto cg = cgroups_->Create(opts_.instance_tag + "-" + spec.id, limits);
  if (!cg.ok()) {
    cleanup();
    co_return cg.error().Context("create cgroup");
  }

  QemuLaunch launch;
  launch.argv = QemuArgv(plan.qemu);
  launch.dir = dir;
  launch.log_path = dir + "/qemu.log";
  launch.uid = uid_;
  launch.gid = gid_;
  launch.pass_fds = plan.pass_fds;
  jail::Cgroup* cgp = cg.value().get();
  launch.place = [cgp](pid_t pid) { return cgp->AddProcess(pid); };
  auto proc = StartQemu(launch);
  if (!proc.ok()) {
    (void)cg.value()->Remove();
    cleanup();
    co_return proc.error().Context("vm " + spec.id);
  }
  VmProcessFacts facts;
  facts.pid = proc->pid;
  auto start_time = ProcStartTime(proc->pid);
  facts.start_time = start_time.ok() ? *start_time : 0;
  {
    // Root-only, outside the directory QEMU can write: what reconcile
    // kills after a crash of hutchd.
    std::ofstream(PidFile(spec.id)) << facts.pid << " " << facts.start_time << "\n";
  }
  auto inst =
      std::make_shared<VmInstance>(spec.id, dir, PidFile(spec.id), facts, std::move(proc->pidfd),
                                   std::move(cg).value(), spec.disk_mb);
  inst->set_netns(spec.netns_path);
  // From here `inst` owns QEMU, the cgroup and the files: an early return
  // destroys them through its destructor.
  inst->set_forks_dir(vm_dir_ + "/forks");
  inst->StartWatch(ex);
  co_return inst;
}

asio::awaitable<Status> VmDriver::WaitAgent(VmInstance& inst,
                                            std::chrono::steady_clock::time_point deadline) {
  // QEMU creates the agent socket as it starts; the guest's agent says
  // hello once the kernel booted and the host side is connected.
  const std::string sock = inst.dir() + "/" + kAgentSocket;
  Result<std::shared_ptr<AgentConnection>> conn = MakeError(Code::kUnavailable, "vm did not start");
  while (std::chrono::steady_clock::now() < deadline) {
    if (inst.exited())
      co_return MakeError(Code::kUnavailable, "vm exited while booting:" + inst.Diagnostics());
    if (access(sock.c_str(), F_OK) != 0) {
      co_await Sleep(std::chrono::milliseconds(5));
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    conn = co_await AgentConnection::Connect(sock, std::max(left, std::chrono::milliseconds(1)));
    // QEMU binds the socket a moment before it listens: a refused connect
    // is retried; a connection that got no hello is the answer.
    if (conn.ok() || conn.error().message.find("connect agent socket") == std::string::npos) break;
    co_await Sleep(std::chrono::milliseconds(5));
  }
  if (!conn.ok()) co_return conn.error().Context("vm agent" + inst.Diagnostics());
  inst.SetAgent(conn.value());
  co_return Status{};
}

asio::awaitable<Result<std::shared_ptr<Instance>>> VmDriver::CreateCold(const InstanceSpec& spec,
                                                                        const std::string& rootfs,
                                                                        const std::string& blank) {
  const auto started = std::chrono::steady_clock::now();
  LaunchPlan plan;
  plan.links = {{rootfs, kRootfsFile}, {blank, kDiskBaseFile}};
  plan.backing = kDiskBaseFile;
  plan.backing_format = "raw";
  plan.qemu = BaseConfig(spec);
  plan.nic = !spec.netns_path.empty();
  auto inst = co_await Launch(spec, std::move(plan));
  if (!inst.ok()) co_return inst.error();
  if (auto st = co_await WaitAgent(**inst, started + opts_.boot_timeout); !st.ok()) {
    co_await (*inst)->Destroy();  // its watch holds it: the destructor would not run yet
    co_return st.error();
  }
  (*inst)->set_boot("cold");
  spdlog::info("sandbox={} vm_booted ms={}", spec.id,
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count());
  co_return std::shared_ptr<Instance>(*inst);
}

asio::awaitable<Result<std::shared_ptr<Instance>>> VmDriver::Adopt(const InstanceSpec& spec,
                                                                   const std::string& facts,
                                                                   bool paused) {
  auto ex = co_await asio::this_coro::executor;
  auto j = nlohmann::json::parse(facts, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      !j.contains("start_time") || !j["start_time"].is_number_unsigned())
    co_return MakeError(Code::kInternal, "malformed adoption facts: " + facts);
  VmProcessFacts pf;
  pf.pid = j["pid"].get<pid_t>();
  pf.start_time = j["start_time"].get<uint64_t>();
  pf.our_child = false;
  // pidfd first, then the start time: a pid recycled in between shows a
  // different start time and is let go.
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pf.pid, 0)));
  if (!pidfd)
    co_return MakeError(Code::kNotFound, "qemu process " + std::to_string(pf.pid) + " is gone");
  auto now_start = ProcStartTime(pf.pid);
  if (!now_start.ok() || *now_start != pf.start_time)
    co_return MakeError(Code::kNotFound,
                        "qemu process " + std::to_string(pf.pid) + " is gone (pid reused)");
  auto cg = cgroups_->Open(opts_.instance_tag + "-" + spec.id);
  if (!cg.ok()) co_return cg.error().Context("adopt");
  const std::string dir = SandboxDir(spec.id);
  auto inst = std::make_shared<VmInstance>(spec.id, dir, PidFile(spec.id), pf, std::move(pidfd),
                                           std::move(cg).value(), spec.disk_mb);
  // QEMU holds the tap; the slot's namespace is kept by the net layer.
  if (j.contains("netns") && j["netns"].is_string()) inst->set_netns(j["netns"].get<std::string>());
  inst->set_forks_dir(vm_dir_ + "/forks");
  inst->StartWatch(ex);
  // A VM that should run but was left stopped (hutchd died during a pause
  // or resume) is continued so its agent can answer.
  if (!paused) {
    if (auto r = QmpExecute(inst->qmp_path(), "cont"); !r.ok())
      co_return r.error().Context("adopt");
  } else {
    inst->set_paused(true);
  }
  // The agent reopens its port within ~20 ms of the old connection's end
  // and greets whoever connects next; a stopped VM greets after Resume.
  auto conn = co_await AgentConnection::Connect(dir + "/" + kAgentSocket, std::chrono::seconds(10),
                                                !paused);
  if (!conn.ok()) co_return conn.error().Context("adopt: vm agent");
  inst->SetAgent(conn.value());
  co_return std::shared_ptr<Instance>(inst);
}

int VmDriver::ReconcileAtStart(const std::set<std::string>& keep) {
  // Every VM of this state dir that was not adopted: its QEMU is killed by
  // the pid and start time recorded at launch, its cgroup (same name scheme
  // as the jail driver's, so either driver's reconcile finds it) and files
  // removed. QEMU processes are never looked up by name.
  int removed = 0;
  // A build that died with the previous run: its overlay mount and copies.
  if (int n = images_.RemoveLeftovers(); n > 0)
    spdlog::info("reconcile vm_image_leftovers removed={}", n);
  // Boot snapshots half-written, or of a guest (kernel, agent, QEMU) or a
  // root image this run can no longer produce.
  if (int n = RemoveStaleBootSnapshots(vm_dir_ + "/snapshots", guest_identity_); n > 0)
    spdlog::info("reconcile vm_boot_snapshots removed={}", n);
  // A fork's state lives only as long as its request.
  {
    std::error_code fec;
    int n = 0;
    for (const auto& e : fs::directory_iterator(vm_dir_ + "/forks", fec)) {
      std::error_code rec;
      fs::remove_all(e.path(), rec);
      ++n;
    }
    if (n > 0) spdlog::info("reconcile vm_fork_leftovers removed={}", n);
  }
  std::set<std::string> ids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(vm_dir_ + "/pids", ec))
    ids.insert(e.path().filename().string());
  for (const auto& e : fs::directory_iterator(vm_dir_ + "/sandboxes", ec))
    ids.insert(e.path().filename().string());
  for (const auto& id : ids) {
    if (keep.count(id)) continue;
    KillRecorded(PidFile(id));
    (void)cgroups_->RemoveExisting(opts_.instance_tag + "-" + id);
    std::error_code rec;
    fs::remove_all(SandboxDir(id), rec);
    fs::remove(PidFile(id), rec);
    ++removed;
  }
  return removed;
}

}  // namespace hutch::vm
