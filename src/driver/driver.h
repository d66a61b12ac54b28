// The isolation backend interface. Core decides states; a driver only
// creates, reports facts about, and destroys instances.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "driver/agent_connection.h"

namespace hutch {

// A host directory to show inside the sandbox (a volume's data).
struct InstanceMount {
  std::string host_dir;
  std::string path;  // absolute, normalized; parents listed before children
  bool read_only = false;
};

// A running instance's whole machine state (memory, devices, disk),
// captured once for a fork; each child restored from it continues where the
// source was, processes included. Drivers that fork by file layers (jail)
// have none. Dropping the last reference removes what it holds.
class MachineImage {
 public:
  virtual ~MachineImage() = default;
};

struct InstanceSpec {
  std::string id;      // sandbox id, e.g. sb_0123...
  std::string rootfs;  // template root filesystem (read-only)
  // Read-only snapshot layers above the template, topmost first.
  std::vector<std::string> layers;
  std::vector<InstanceMount> mounts;
  double cpus = 1;
  int64_t memory_mb = 512;
  int64_t disk_mb = 2048;
  int64_t pids_max = 512;
  // The network namespace to run in (prepared by the net layer, with its
  // interface and routes); empty: a fresh one with loopback only.
  std::string netns_path;
  // /etc/resolv.conf inside, when the sandbox has a network.
  std::string resolv_conf;
  // The host's end of the network slot: the sandbox's route and DNS server
  // (a vm guest's own resolver address is forwarded there).
  std::string gateway;
  // A fork child of a running instance: continue this machine instead of
  // booting (same driver, same cpus and memory as its source).
  std::shared_ptr<MachineImage> machine;
};

struct InstanceStats {
  uint64_t cpu_usage_ns = 0;
  uint64_t memory_current = 0;
  uint64_t memory_peak = 0;
  uint64_t pids_current = 0;
  uint64_t oom_kills = 0;
  uint64_t disk_used_bytes = 0;  // the writable layer
  uint64_t disk_limit_bytes = 0;
  uint64_t net_rx_bytes = 0;  // interfaces other than loopback
  uint64_t net_tx_bytes = 0;
};

// One running sandbox: its process tree and the channel to its agent.
class Instance {
 public:
  virtual ~Instance() = default;
  virtual std::shared_ptr<AgentConnection> agent() = 0;
  // Processes the kernel OOM-killed in this sandbox so far.
  virtual uint64_t OomKills() = 0;
  // The count of OOM kills the agent's kernel reported with an exit
  // (`oom_kills` of the exit frame). Only a vm sandbox's agent has its own
  // kernel: the guest's OOM killer is invisible to QEMU's host cgroup, so
  // the vm instance adds what the guest counted to OomKills().
  virtual void NoteAgentOomKills(uint64_t) {}
  virtual Result<InstanceStats> Stats() = 0;
  // Stops every process of the sandbox where it is (memory and open files
  // stay; no CPU) / lets them go on. Idempotent.
  virtual Status Pause() = 0;
  virtual Status Resume() = 0;
  // Copies the sandbox's writable layer (what it changed over its lower
  // layers: files, deletions as whiteouts, modes, owners, xattrs) into the
  // empty directory `dst`, consistently: its processes are frozen while
  // the copy runs (a paused sandbox stays paused).
  virtual asio::awaitable<Status> CaptureLayer(const std::string& dst) = 0;
  // An fd of the sandbox's network namespace (O_CLOEXEC; setns(2) with
  // CLONE_NEWNET takes it), for hutchd to open sockets in it (the port
  // proxy). The one place that knows where a sandbox's netns comes from.
  virtual Result<UniqueFd> NetNamespace() = 0;
  // The address in that namespace where the sandbox's servers listen: its
  // own loopback for a jail (which shares the namespace), the guest's
  // address for a vm (a guest's loopback is its own kernel's).
  virtual std::string PortAddress() const { return "127.0.0.1"; }
  // Kills everything and frees every kernel resource; idempotent.
  virtual asio::awaitable<void> Destroy() = 0;
  // What the driver needs to find this instance again after hutchd
  // restarts (JSON text, stored with the sandbox's record).
  virtual std::string AdoptionFacts() const = 0;
  // How it came up: "cold" (booted), "restore" (from a boot snapshot),
  // "fork" (a running machine's copy); "" where the driver has one way.
  virtual std::string boot() const { return ""; }
  // The whole machine for a fork (see MachineImage); kNotSupported where
  // forks go through CaptureLayer. A running source keeps running after,
  // a paused one stays paused.
  virtual asio::awaitable<Result<std::shared_ptr<MachineImage>>> CaptureMachine() {
    co_return MakeError(Code::kNotSupported, "this driver forks by file layers");
  }
  // Called once if the sandbox dies on its own (agent exit, connection loss).
  std::function<void(const std::string& reason)> on_lost;
};

// What a driver keeps made ahead of creates, for /metrics (and tests that
// must not take a baseline while a pool is still filling).
struct DriverPools {
  size_t disks_ready = 0;   // disk images formatted and waiting for a create
  size_t disks_wanted = 0;  // how many the pool aims to hold now
};

class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string name() const = 0;
  // Returns only once the agent answered: the sandbox can run commands.
  virtual asio::awaitable<Result<std::shared_ptr<Instance>>> Create(const InstanceSpec& spec) = 0;
  // After a restart: takes back an instance an earlier run of this state dir
  // created, if it is still healthy (its agent answers again). On error
  // nothing is taken; ReconcileAtStart then removes what is left of it.
  // A sandbox stored as paused is adopted without being woken (paused=true):
  // its processes must not run a single instruction until Resume.
  virtual asio::awaitable<Result<std::shared_ptr<Instance>>> Adopt(const InstanceSpec& spec,
                                                                   const std::string& facts,
                                                                   bool paused) = 0;
  // At start, after adoption: removes everything an earlier run of this
  // state dir left behind (processes, cgroups, sandbox dirs) except the
  // instances in `keep`. Returns how many were removed.
  virtual int ReconcileAtStart(const std::set<std::string>& keep) = 0;
  virtual DriverPools Pools() { return {}; }
};

}  // namespace hutch
