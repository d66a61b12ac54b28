// SandboxManager: the registry and state machine of all sandboxes.
//
// Every dialect front-end calls these operations; states change only here.
// Runs on the I/O thread only (no locks): operations are coroutines on the
// io_context, and a sandbox's transitions are serialized by that thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/idempotency.h"
#include "core/sandbox.h"
#include "core/snapshot.h"
#include "core/template_builder.h"
#include "core/templates.h"
#include "core/volume_manager.h"
#include "driver/driver.h"
#include "net/network_manager.h"
#include "store/state_store.h"

namespace hutch {

struct ManagerOptions {
  int64_t default_ttl_seconds = 300;
  int64_t max_ttl_seconds = 24 * 3600;
  int max_sandboxes = 200;
  // Sum of memory_mb over starting and running sandboxes that the host
  // accepts (their hard limits); 0 = no cap.
  int64_t max_memory_committed_mb = 0;
  double default_cpu = 1;
  int64_t default_memory_mb = 512;
  int64_t default_disk_mb = 2048;
  int64_t max_memory_mb = 16384;
  int64_t max_disk_mb = 65536;
  int64_t pids_max = 512;
  // How long a deleted sandbox is remembered (a second DELETE is then 204,
  // a GET shows it stopped).
  std::chrono::seconds tombstone_ttl{3600};
  // Where snapshot layers live (<state>/snapshots); empty: no snapshots.
  std::string snapshots_dir;
  int max_fork = 16;
};

struct CreateOptions {
  std::string template_name = "base";
  // The isolation backend ("jail", "vm"); empty: the server's default.
  std::string driver;
  std::optional<int64_t> ttl_seconds;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  std::optional<double> cpu;
  std::optional<int64_t> memory_mb;
  std::optional<int64_t> disk_mb;
  std::string owner_key;
  std::string snapshot;  // start from this snapshot instead of a template
  // Read-only layers to run on when `snapshot` is empty (fork: its
  // internal snapshot's stack, which the API cannot name).
  std::vector<std::string> layers;
  std::string rootfs;  // with `layers`: the bottom under them
  std::vector<VolumeMountRequest> volumes;
  int64_t auto_pause_seconds = 0;
  net::NetworkPolicy network;
  // A fork child of a running machine (vm driver): restored from this
  // instead of booted; the template's start command is not run again.
  std::shared_ptr<MachineImage> machine;
};

struct ListFilter {
  std::optional<SandboxStatus> status;
  // When non-empty, the status must be one of these (E2B lists
  // running,paused).
  std::vector<SandboxStatus> any_status;
  std::map<std::string, std::string> metadata;
  size_t limit = 50;
  std::string cursor;  // last id of the previous page
};

struct ListPage {
  std::vector<SandboxRecord> items;
  std::string next_cursor;  // empty when this is the last page
};

class SandboxManager {
 public:
  // `store` may be null (nothing persists; for tools and tests of core).
  // `driver` is the default driver; AddDriver registers more.
  SandboxManager(ManagerOptions opts, Driver* driver, TemplateRegistry* templates, store::StateStore* store)
      : opts_(opts), driver_(driver), templates_(templates), store_(store) {
    drivers_[driver->name()] = driver;
  }
  // Another driver a create may name; `default_driver` makes it the one a
  // create without "driver" gets.
  void AddDriver(Driver* d, bool default_driver = false) {
    drivers_[d->name()] = d;
    if (default_driver) driver_ = d;
  }
  // A driver this server knows but cannot run (`why`: its error at start).
  void SetDriverUnavailable(const std::string& name, std::string why) { unavailable_drivers_[name] = std::move(why); }
  std::string default_driver() const { return driver_->name(); }
  std::vector<std::string> driver_names() const;

  // Templates: the registry, and the builder (null: builds are refused).
  TemplateRegistry* templates() const { return templates_; }
  void SetTemplateBuilder(TemplateBuilder* b) { builder_ = b; }
  TemplateBuilder* template_builder() const { return builder_; }
  // Removes a built template's name; its build dir goes once no sandbox
  // or snapshot stands on it.
  Status DeleteTemplate(const std::string& name);

  // Volumes sandboxes may mount (null: a create asking for one fails).
  void SetVolumes(VolumeManager* v) { volumes_ = v; }
  VolumeManager* volumes() const { return volumes_; }
  // Sandbox networking (null: only mode none is available; `why` says why
  // in errors).
  void SetNetwork(net::NetworkManager* n, std::string why) {
    net_ = n;
    net_unavailable_ = std::move(why);
  }
  net::NetworkManager* network() const { return net_; }
  // Replaces a running or paused sandbox's egress policy; new connections
  // follow it at once.
  asio::awaitable<Result<SandboxRecord>> SetNetworkPolicy(const std::string& id, net::NetworkPolicy p);
  // Sandboxes that have the volume mounted (starting, running or paused).
  std::vector<std::string> VolumeUsers(const std::string& name) const;

  // At start, before serving: loads the stored sandboxes, adopts the ones
  // that were running and whose agents still answer, marks the others
  // failed, forgets creates that were never acknowledged, and has the
  // driver remove everything else an earlier run left.
  struct RecoverReport {
    int adopted = 0, lost = 0, expired = 0, forgotten = 0, removed = 0;
  };
  asio::awaitable<Result<RecoverReport>> Recover();

  asio::awaitable<Result<SandboxRecord>> Create(CreateOptions o);
  // Create under an Idempotency-Key: the same key (per owner_key) with the
  // same canonical body returns the first request's sandbox (*replayed set);
  // another body is a conflict; a retry while the first is still starting
  // waits for it.
  asio::awaitable<Result<SandboxRecord>> CreateIdempotent(CreateOptions o, const std::string& key,
                                                          const std::string& canonical_body, bool* replayed);
  // Running sandbox, or sandbox_not_found / sandbox_not_running / conflict
  // (paused). A sandbox the idle policy paused is resumed here: any request
  // that needs it running wakes it. Marks the sandbox active.
  Result<std::shared_ptr<Sandbox>> GetRunning(const std::string& id);
  Result<SandboxRecord> Get(const std::string& id);
  ListPage List(const ListFilter& f);
  // 204 semantics: ok for running and already-deleted ids; not_found for
  // ids never issued.
  asio::awaitable<Status> Delete(const std::string& id, const std::string& reason = "deleted");
  Result<SandboxRecord> SetTtl(const std::string& id, int64_t ttl_seconds);
  // Merges `patch` into the sandbox's metadata (a nullopt value removes the
  // key) and persists it; running and paused sandboxes only.
  Result<SandboxRecord> PatchMetadata(const std::string& id,
                                      const std::map<std::string, std::optional<std::string>>& patch);
  // Snapshots (see core/snapshot.h). The sandbox may be running or paused.
  asio::awaitable<Result<SnapshotRecord>> Snapshot(const std::string& id);
  std::vector<SnapshotRecord> ListSnapshots() const;
  // Host dirs that sandboxes and kept snapshots stand on (template build
  // dirs among them are not collected while listed here).
  std::set<std::string> UsedLowerDirs() const;
  Result<SnapshotRecord> GetSnapshot(const std::string& id) const;
  Status DeleteSnapshot(const std::string& id);
  // `count` new sandboxes from the current files of a running or paused
  // one (copy-on-write layers; processes are not copied).
  asio::awaitable<Result<std::vector<SandboxRecord>>> Fork(const std::string& id, int count, const std::string& owner_key);

  // running -> paused (cgroup freezer) and back; each is idempotent. The
  // TTL keeps counting while paused: a paused sandbox still holds memory.
  // `idle`: the idle policy pauses (the next request that needs the
  // sandbox resumes it); the API's pause stays until an explicit resume.
  Result<SandboxRecord> Pause(const std::string& id, bool idle = false);
  Result<SandboxRecord> Resume(const std::string& id);
  // Starts the TTL reaper on the current executor.
  void StartReaper(asio::any_io_executor ex);
  // Destroys every sandbox (server shutdown).
  asio::awaitable<void> Shutdown();
  size_t running_count() const;
  int64_t committed_memory_mb() const;
  const ManagerOptions& options() const { return opts_; }
  // Sandboxes by status, stopped tombstones included (for /metrics).
  std::map<SandboxStatus, size_t> CountByStatus() const {
    std::map<SandboxStatus, size_t> n;
    for (const auto& [id, sb] : sandboxes_) ++n[sb->rec.status];
    return n;
  }

 private:
  asio::awaitable<void> ReapLoop();
  // Pauses running sandboxes idle for longer than their auto_pause_seconds.
  void PauseIdle();
  void MarkFailed(const std::string& id, const std::string& reason);
  // Writes the sandbox's record (and its instance's adoption facts) to the
  // store; a no-op without a store.
  Status Persist(const Sandbox& sb);
  Status PersistSnapshot(const SnapshotRecord& s);
  asio::awaitable<Result<SnapshotRecord>> TakeSnapshot(Sandbox& sb, bool internal);
  // Removes the files and rows of deleted snapshots nothing stands on.
  void CollectSnapshots();
  void Forget(const std::string& id);
  // A template's start command (in the background) and ready check (polled
  // until it exits 0), before a create is answered.
  asio::awaitable<Status> StartTemplateProcess(std::shared_ptr<Sandbox> sb, const TemplateInfo& tpl);
  // Destroys a sandbox's instance, then frees its network slot.
  asio::awaitable<void> Teardown(std::shared_ptr<Instance> inst, int net_slot);

  // The driver a create names (empty: the default), or why there is none.
  Result<Driver*> PickDriver(const std::string& name) const;

  ManagerOptions opts_;
  Driver* driver_;  // the default
  std::map<std::string, Driver*> drivers_;
  std::map<std::string, std::string> unavailable_drivers_;
  TemplateRegistry* templates_;
  store::StateStore* store_;
  VolumeManager* volumes_ = nullptr;
  TemplateBuilder* builder_ = nullptr;
  net::NetworkManager* net_ = nullptr;
  std::string net_unavailable_ = "networking is not configured";
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;  // ordered: cursor paging
  std::map<std::string, SnapshotRecord> snapshots_;
  int starting_ = 0;
  IdempotencyCache idempotency_;
  asio::any_io_executor ex_;
  bool shutting_down_ = false;
};

}  // namespace hutch
