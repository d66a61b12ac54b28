// The vm driver's restores (docs/vm-driver.md "Boot once, restore many"
// and "Fork"): boot snapshots are built once per boot key, loaded into a
// sealed memfd once per run, and every create of the key restores from
// them; fork children restore from their source's saved machine. Either
// way the copy is then re-identified (kIdentify) before it is handed out.
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "driver/vm/boot_snapshots.h"
#include "driver/vm/migration.h"
#include "driver/vm/sealed_ram.h"
#include "driver/vm/vm_driver.h"
#include "driver/vm/vm_fork.h"
#include "driver/vm/vm_instance.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Removes a build directory unless the build was installed.
struct BuildDir {
  std::string path;
  bool keep = false;
  ~BuildDir() {
    if (keep) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

asio::awaitable<Result<std::shared_ptr<const VmDriver::LoadedSnapshot>>> VmDriver::BootSnapshot(
    const InstanceSpec& spec, const std::string& rootfs, const std::string& blank) {
  BootKeyParts parts;
  parts.rootfs_image = rootfs;
  parts.blank_disk = blank;
  parts.memory_mb = spec.memory_mb;
  parts.vcpus = BaseConfig(spec).vcpus;
  parts.accel = accel_.accel == Accel::kKvm ? "kvm" : "tcg";
  parts.guest_identity = guest_identity_;
  parts.nic = !spec.netns_path.empty();
  const std::string key = BootKey(parts);
  // Concurrent first creates of a key: one builds, the others wait for it.
  while (building_.count(key)) co_await Pause(std::chrono::milliseconds(50));
  if (auto it = snapshots_.find(key); it != snapshots_.end()) {
    it->second->last_used = ++restores_;
    co_return std::shared_ptr<const LoadedSnapshot>(it->second);
  }
  if (auto f = failed_.find(key); f != failed_.end())
    co_return MakeError(Code::kUnavailable,
                        "boot snapshot " + key + " failed earlier: " + f->second);
  building_.insert(key);
  struct Turn {
    std::set<std::string>* set;
    std::string key;
    ~Turn() { set->erase(key); }
  } turn{&building_, key};

  const std::string dir = vm_dir_ + "/snapshots/" + key;
  const std::string state = dir + "/" + kStateFile;
  if (access(state.c_str(), F_OK) != 0) {
    if (auto st = co_await BuildBootSnapshot(spec, rootfs, blank, key); !st.ok()) {
      // Later creates of this key boot cold without trying again.
      failed_[key] = st.error().message;
      spdlog::warn("vm_boot_snapshot_failed key={} err=\"{}\" (sandboxes of this key boot cold)",
                   key, st.error().message);
      co_return st.error();
    }
  }
  auto ram = SealedCopy(dir + "/" + kRamFile);
  if (!ram.ok()) {
    failed_[key] = ram.error().message;
    spdlog::warn("vm_boot_snapshot_failed key={} err=\"{}\" (sandboxes of this key boot cold)", key,
                 ram.error().message);
    co_return ram.error();
  }
  auto loaded = std::make_shared<LoadedSnapshot>();
  loaded->dir = dir;
  loaded->ram = std::move(ram).value();
  loaded->last_used = ++restores_;
  while (snapshots_.size() >= kLoadedSnapshotsMax) {
    auto lru = std::min_element(
        snapshots_.begin(), snapshots_.end(),
        [](const auto& a, const auto& b) { return a.second->last_used < b.second->last_used; });
    spdlog::info("vm_boot_snapshot_unloaded key={}", lru->first);
    snapshots_.erase(lru);
  }
  snapshots_[key] = loaded;
  co_return std::shared_ptr<const LoadedSnapshot>(loaded);
}

asio::awaitable<Status> VmDriver::BuildBootSnapshot(const InstanceSpec& spec,
                                                    const std::string& rootfs,
                                                    const std::string& blank,
                                                    const std::string& key) {
  const auto started = Clock::now();
  BuildDir build{vm_dir_ + "/snapshots/" + kSnapshotsBuildPrefix + key};
  std::error_code ec;
  fs::remove_all(build.path, ec);
  fs::create_directories(build.path, ec);
  if (ec || chmod(build.path.c_str(), 0700) != 0)
    co_return MakeError(Code::kInternal, "create " + build.path);

  // The base VM is a sandbox like any other for the length of the build
  // (its own id, dir, cgroup and pid file, so reconcile finds a crashed
  // build's QEMU), except that its RAM is a file it maps shared.
  InstanceSpec base = spec;
  base.id = "sb_" + RandomHex(8);  // an id's length: the kernel command line matches the restores'
  // A sandbox with a network gets a NIC, so its boot snapshot has one too,
  // on a tap connected to nothing: the base VM is in no network slot.
  base.netns_path.clear();
  LaunchPlan plan;
  plan.nic = !spec.netns_path.empty();
  plan.links = {{rootfs, kRootfsFile}, {blank, kDiskBaseFile}};
  plan.backing = kDiskBaseFile;
  plan.backing_format = "raw";
  plan.qemu = BaseConfig(base);
  plan.qemu.ram = RamKind::kSharedFile;
  plan.qemu.ram_path = kRamFile;
  auto inst = co_await Launch(base, std::move(plan));
  if (!inst.ok()) co_return inst.error().Context("boot snapshot: base vm");
  VmInstance& vm = **inst;
  if (auto st = co_await WaitAgent(vm, started + opts_.boot_timeout); !st.ok()) {
    co_await vm.Destroy();
    co_return st.error().Context("boot snapshot: base vm");
  }
  const int64_t boot_ms = MsSince(started);
  // Devices only: the RAM is in the shared file already.
  const std::string state = build.path + "/" + kStateFile;
  if (auto st = co_await SaveState(vm.qmp_path(), state, true, std::chrono::minutes(1)); !st.ok()) {
    co_await vm.Destroy();
    co_return st.error().Context("boot snapshot");
  }
  // The stream is written and QEMU flushed the disk: end it, take the RAM
  // file (a shared mapping: its pages are the file's) and the disk out.
  co_await vm.KillQemu();
  for (const char* name : {kRamFile, kDiskFile}) {
    if (rename((vm.dir() + "/" + name).c_str(), (build.path + "/" + name).c_str()) != 0) {
      Error e = ErrnoError(std::string("boot snapshot: take ") + name);
      co_await vm.Destroy();
      co_return e;
    }
  }
  co_await vm.Destroy();
  if (auto st =
          InstallBootSnapshot(build.path, vm_dir_ + "/snapshots/" + key, guest_identity_, rootfs);
      !st.ok())
    co_return st.error();
  build.keep = true;
  spdlog::info("vm_boot_snapshot key={} boot_ms={} total_ms={}", key, boot_ms, MsSince(started));
  co_return Status{};
}

asio::awaitable<Result<std::shared_ptr<Instance>>> VmDriver::Restore(const InstanceSpec& spec,
                                                                     const std::string& rootfs,
                                                                     const std::string& blank,
                                                                     const LoadedSnapshot& snap) {
  const auto started = Clock::now();
  const std::string state_path = snap.dir + "/" + kStateFile;
  UniqueFd state(open(state_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state) co_return ErrnoError("open " + state_path);
  LaunchPlan plan;
  // The sandbox's disk stands on the base VM's (which stands on the blank
  // disk): the guest's file system continues where the base left it.
  plan.links = {
      {rootfs, kRootfsFile}, {blank, kDiskBaseFile}, {snap.dir + "/" + kDiskFile, kSnapDiskFile}};
  plan.backing = kSnapDiskFile;
  plan.backing_format = "qcow2";
  plan.qemu = BaseConfig(spec);
  plan.qemu.ram = RamKind::kPrivateFile;
  plan.qemu.ram_path = "/proc/self/fd/4";  // the sealed memfd, mapped copy-on-write
  plan.qemu.incoming = true;
  plan.pass_fds = {state.get(), snap.ram.get()};
  plan.nic = !spec.netns_path.empty();  // as the snapshot's key says
  auto inst = co_await Launch(spec, std::move(plan));
  if (!inst.ok()) co_return inst.error();
  state.reset();
  if (auto st = co_await Awaken(**inst, spec, true, started + opts_.boot_timeout); !st.ok()) {
    co_await (*inst)->Destroy();  // its watch holds it: the destructor would not run yet
    co_return st.error();
  }
  (*inst)->set_boot("restore");
  spdlog::info("sandbox={} vm_restored ms={}", spec.id, MsSince(started));
  co_return std::shared_ptr<Instance>(*inst);
}

asio::awaitable<Result<std::shared_ptr<Instance>>> VmDriver::RestoreFork(const InstanceSpec& spec,
                                                                         const std::string&,
                                                                         const std::string&) {
  const auto started = Clock::now();
  auto* image = dynamic_cast<VmForkImage*>(spec.machine.get());
  if (!image)
    co_return MakeError(Code::kInvalidRequest, "fork of a vm sandbox from another driver's image");
  const std::string state_path = image->state_path();
  UniqueFd state(open(state_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state) co_return ErrnoError("open " + state_path);
  LaunchPlan plan;
  for (const auto& f : image->files()) plan.links.emplace_back(image->dir() + "/" + f, f);
  plan.backing = image->disk_name();
  plan.backing_format = "qcow2";
  plan.qemu = BaseConfig(spec);  // RAM: anonymous, filled from the stream
  plan.qemu.incoming = true;
  plan.pass_fds = {state.get()};
  plan.nic = image->nic();
  auto inst = co_await Launch(spec, std::move(plan));
  if (!inst.ok()) co_return inst.error();
  state.reset();
  if (auto st = co_await Awaken(**inst, spec, false, started + opts_.boot_timeout); !st.ok()) {
    co_await (*inst)->Destroy();
    co_return st.error();
  }
  (*inst)->set_boot("fork");
  spdlog::info("sandbox={} vm_fork_restored ms={}", spec.id, MsSince(started));
  co_return std::shared_ptr<Instance>(*inst);
}

asio::awaitable<Status> VmDriver::Awaken(VmInstance& inst, const InstanceSpec& spec,
                                         bool ignore_shared, Clock::time_point deadline) {
  const std::function<bool()> exited = [&inst]() { return inst.exited(); };
  auto left = [&deadline]() {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds(1));
  };
  const std::string qmp = inst.qmp_path();
  const auto load_budget = left();
  const int stream_fd = 3;  // LaunchPlan::pass_fds[0]
  if (auto st = co_await FinishIncoming(qmp, stream_fd, ignore_shared, exited, load_budget);
      !st.ok())
    co_return st.error().Context("vm " + spec.id + inst.Diagnostics());
  // The saved guest still holds the connection of the host it was saved
  // under. QEMU tells it that host is gone once it runs (virtio-serial's
  // post-load check); a host that connects before that check ran is taken
  // for the old one and gets no hello. So: connect, and if no hello comes,
  // hang up and let the guest see the port closed (it then reopens it and
  // greets the next connection) before trying again. Reconnecting at once
  // would flip the port closed and open again before the guest looked.
  const std::string sock = inst.dir() + "/" + kAgentSocket;
  Result<std::shared_ptr<AgentConnection>> conn = MakeError(Code::kUnavailable, "no agent");
  // The guest must run a moment with the port closed: give it that before
  // the first try (measured: connecting right after `cont` loses).
  std::chrono::milliseconds wait(1000), gap(300);
  co_await Pause(std::chrono::milliseconds(150));
  while (Clock::now() < deadline) {
    if (inst.exited())
      co_return MakeError(Code::kUnavailable, "vm exited after restore:" + inst.Diagnostics());
    const auto attempt = std::min(wait, left());
    conn = co_await AgentConnection::Connect(sock, attempt);
    if (conn.ok()) break;
    spdlog::info("sandbox={} vm_agent_reconnect err=\"{}\"", spec.id, conn.error().message);
    co_await Pause(gap);
    wait *= 2;
    gap *= 2;
  }
  if (!conn.ok()) co_return conn.error().Context("vm agent after restore" + inst.Diagnostics());
  inst.SetAgent(conn.value());
  auto agent = conn.value();
  if (!agent->has_feature("identify"))
    co_return MakeError(Code::kInternal, "the restored guest's agent cannot take a new identity");
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const std::string payload = nlohmann::json{
      {"hostname", spec.id},
      {"realtime_ns", now_ns},
      {"entropy", RandomHex(64)}}.dump();
  auto reply = co_await agent->Call(wire::Type::kIdentify, payload);
  if (!reply.ok()) co_return reply.error().Context("identify restored vm");
  if (reply->type != wire::Type::kIdentifyResult) {
    auto j = nlohmann::json::parse(reply->payload, nullptr, false);
    const std::string msg = j.is_object() ? j.value("message", reply->payload) : reply->payload;
    co_return MakeError(Code::kInternal, "identify restored vm: " + msg);
  }
  co_return Status{};
}

}  // namespace hutch::vm
