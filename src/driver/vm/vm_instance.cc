#include "driver/vm/vm_instance.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/net_dev.h"
#include "common/subprocess.h"
#include "driver/vm/guest_network.h"
#include "driver/vm/qemu_command.h"
#include "driver/vm/qmp_client.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {
int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

std::string Tail(const std::string& path, size_t max) {
  // The sandbox dir belongs to the vm user: a compromised QEMU could put a
  // symlink to a host secret here for hutchd (root) to quote in an error.
  // O_NOFOLLOW, and only a regular file.
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t from = size > max ? size - max : 0;
  std::string s(size - from, '\0');
  ssize_t n = pread(fd.get(), s.data(), s.size(), static_cast<off_t>(from));
  s.resize(n > 0 ? static_cast<size_t>(n) : 0);
  // Keep printable text only: the console has terminal escapes.
  std::string out;
  for (char c : s)
    if ((c >= 0x20 && c < 0x7f) || c == '\n') out.push_back(c == '\n' ? ' ' : c);
  return out;
}
}  // namespace

VmInstance::VmInstance(std::string id, std::string dir, std::string pidfile, VmProcessFacts proc,
                       UniqueFd pidfd, std::unique_ptr<jail::Cgroup> cg, int64_t disk_mb)
    : id_(std::move(id)),
      dir_(std::move(dir)),
      pidfile_(std::move(pidfile)),
      proc_(proc),
      pidfd_(std::move(pidfd)),
      cgroup_(std::move(cg)),
      disk_mb_(disk_mb) {}

VmInstance::~VmInstance() {
  // Destroy() is the normal path; this is the backstop so nothing leaks.
  if (!destroyed_) DestroyNow();
}

std::string VmInstance::AdoptionFacts() const {
  return nlohmann::json{
      {"pid", proc_.pid}, {"start_time", proc_.start_time}, {"netns", netns_path_}}
      .dump();
}

bool VmInstance::exited() const {
  pollfd p{pidfd_.get(), POLLIN, 0};
  return !pidfd_.valid() || poll(&p, 1, 0) == 1;
}

std::string VmInstance::Diagnostics() const {
  std::string s;
  const std::string con = Tail(dir_ + "/" + kConsoleLog, 600);
  const std::string log = Tail(dir_ + "/qemu.log", 400);
  if (!con.empty()) s += " console: " + con;
  if (!log.empty()) s += " qemu: " + log;
  return s;
}

Result<InstanceStats> VmInstance::Stats() {
  if (!cgroup_ || destroyed_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
  auto s = cgroup_->Stats();
  if (!s.ok()) return s.error();
  // QEMU's own cgroup: CPU time of the vCPU and I/O threads, host memory
  // the VM holds (guest RAM it touched + QEMU). Guest-internal figures
  // would need a round trip to the agent.
  InstanceStats out = jail::ToInstanceStats(*s);
  out.oom_kills = OomKills();  // with the guest's own, as exec results count them
  // The sandbox's writes are the qcow2 overlay's allocated clusters.
  struct stat st;
  if (lstat((dir_ + "/" + kDiskFile).c_str(), &st) == 0)
    out.disk_used_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  out.disk_limit_bytes = static_cast<uint64_t>(disk_mb_) << 20;
  // The slot's eth0, as a jail sandbox counts its own eth0: what went to
  // and came from outside (the port proxy's traffic stays on the tap).
  if (!netns_path_.empty()) {
    UniqueFd ns(open(netns_path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (ns) {
      if (auto net = NetDevInNetns(ns.get(), "eth0"); net.ok()) {
        out.net_rx_bytes = net->rx_bytes;
        out.net_tx_bytes = net->tx_bytes;
      }
    }
  }
  return out;
}

Status VmInstance::Pause() {
  if (destroyed_ || destroying_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
  if (capturing_) return MakeError(Code::kConflict, "a fork of this sandbox is in progress");
  if (auto r = QmpExecute(qmp_path(), "stop"); !r.ok()) return r.error().Context("pause vm");
  paused_ = true;
  return Status{};
}

Status VmInstance::Resume() {
  if (destroyed_ || destroying_) return MakeError(Code::kSandboxNotRunning, "sandbox destroyed");
  if (capturing_) return MakeError(Code::kConflict, "a fork of this sandbox is in progress");
  if (auto r = QmpExecute(qmp_path(), "cont"); !r.ok()) return r.error().Context("resume vm");
  paused_ = false;
  return Status{};
}

asio::awaitable<Status> VmInstance::CaptureLayer(const std::string&) {
  co_return MakeError(Code::kNotSupported, "snapshots of vm sandboxes are not supported yet");
}

Result<UniqueFd> VmInstance::NetNamespace() {
  if (netns_path_.empty())
    return MakeError(Code::kNotSupported,
                     "vm sandbox " + id_ +
                         " has no network (mode none): its ports are reachable only from inside");
  UniqueFd ns(open(netns_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns) return ErrnoError("open network namespace of " + id_);
  return ns;
}

std::string VmInstance::PortAddress() const { return kGuestAddress; }

asio::awaitable<void> VmInstance::Destroy() {
  if (destroyed_) co_return;
  destroying_ = true;
  if (agent_) agent_->Close();
  if (pidfd_.valid()) {
    // SIGKILL works on a stopped VM too (QMP stop only halts the vCPUs).
    PidfdSendSignal(pidfd_.get(), SIGKILL);
    co_await WaitReadable(pidfd_.get(), std::chrono::seconds(10));
  }
  DestroyNow();
}

asio::awaitable<void> VmInstance::KillQemu() {
  destroying_ = true;  // an exit from here on is no loss to report
  if (agent_) agent_->Close();
  if (pidfd_.valid()) {
    PidfdSendSignal(pidfd_.get(), SIGKILL);
    co_await WaitReadable(pidfd_.get(), std::chrono::seconds(10));
  }
}

void VmInstance::DestroyNow() {
  destroyed_ = true;
  on_lost = nullptr;
  if (agent_) agent_->Close();
  if (pidfd_.valid()) PidfdSendSignal(pidfd_.get(), SIGKILL);
  if (proc_.our_child && !reaped_ && proc_.pid > 0) {
    // Our child: reap it (an adopted QEMU is reaped by the host's init).
    waitpid(proc_.pid, nullptr, 0);
  }
  reaped_ = true;
  if (cgroup_) {
    // Kills whatever is still in the cgroup, then removes it.
    if (auto st = cgroup_->Remove(); !st.ok())
      spdlog::error("sandbox={} cgroup_remove_failed err=\"{}\"", id_, st.error().message);
    cgroup_.reset();
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (ec) spdlog::error("sandbox={} remove_dir_failed dir={} err=\"{}\"", id_, dir_, ec.message());
  fs::remove(pidfile_, ec);
}

void VmInstance::StartWatch(asio::any_io_executor ex) {
  asio::co_spawn(
      ex,
      [self = shared_from_this()]() -> asio::awaitable<void> {
        bool ready = false;
        while (!ready && !self->destroyed_)
          ready = co_await WaitReadable(self->pidfd_.get(), std::chrono::hours(24));
        if (self->destroying_ || self->destroyed_) co_return;
        std::string why = "vm exited";
        if (self->proc_.our_child) {
          int st = 0;
          if (waitpid(self->proc_.pid, &st, WNOHANG) > 0) {
            self->reaped_ = true;
            why = WIFSIGNALED(st) ? "qemu killed by signal " + std::to_string(WTERMSIG(st))
                                  : "vm exited with status " + std::to_string(WEXITSTATUS(st));
          }
        }
        if (self->on_lost) {
          auto cb = std::move(self->on_lost);
          self->on_lost = nullptr;
          cb(why + self->Diagnostics());
        }
      },
      asio::detached);
}

void VmInstance::SetAgent(std::shared_ptr<AgentConnection> conn) {
  agent_ = std::move(conn);
  std::weak_ptr<VmInstance> weak = shared_from_this();
  agent_->on_lost = [weak](const std::string& why) {
    if (auto i = weak.lock(); i && i->on_lost) {
      auto cb = std::move(i->on_lost);
      i->on_lost = nullptr;
      cb(why);
    }
  };
}

}  // namespace hutch::vm
