// SandboxManager: the registry and state machine of all sandboxes.
//
// Every dialect front-end calls these operations; states change only here.
// Runs on the I/O thread only (no locks): operations are coroutines on the
// io_context, and a sandbox's transitions are serialized by that thread.
//
// The work is split by concern, over one shared ManagerState: the sandbox
// state machine (SandboxLifecycle), snapshots and forks (SnapshotBook),
// and the timed and collecting work (Reaper). This class wires them and
// is the interface the API layers call.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/manager_state.h"
#include "core/net_slots.h"
#include "core/reaper.h"
#include "core/sandbox_lifecycle.h"
#include "core/snapshot_book.h"
#include "core/warm_pool.h"
#include "driver/driver.h"
#include "net/network_manager.h"
#include "store/state_store.h"

namespace hutch {

class SandboxManager {
 public:
  // `store` may be null (nothing persists; for tools and tests of core).
  // `driver` is the default driver; AddDriver registers more.
  SandboxManager(ManagerOptions opts, Driver* driver, TemplateRegistry* templates,
                 store::StateStore* store)
      : state_(std::move(opts), driver, templates, store),
        snaps_(state_),
        life_(state_, snaps_),
        warm_(state_, life_),
        reaper_(state_, life_, snaps_, &warm_) {
    snaps_.set_lifecycle(&life_);
    life_.set_warm_pool(&warm_);
    warm_.Configure(state_.opts.warm_pool);
  }
  SandboxManager(const SandboxManager&) = delete;
  SandboxManager& operator=(const SandboxManager&) = delete;
  // Another driver a create may name; `default_driver` makes it the one a
  // create without "driver" gets.
  void AddDriver(Driver* d, bool default_driver = false) {
    state_.drivers[d->name()] = d;
    if (default_driver) state_.driver = d;
  }
  // A driver this server knows but cannot run (`why`: its error at start).
  void SetDriverUnavailable(const std::string& name, std::string why) {
    state_.unavailable_drivers[name] = std::move(why);
  }
  std::string default_driver() const { return state_.driver->name(); }
  std::vector<std::string> driver_names() const;
  const std::map<std::string, Driver*>& drivers() const { return state_.drivers; }

  // Templates: the registry, and the builder (null: builds are refused).
  TemplateRegistry* templates() const { return state_.templates; }
  void SetTemplateBuilder(TemplateBuilder* b) { state_.builder = b; }
  TemplateBuilder* template_builder() const { return state_.builder; }
  // Templates from OCI images (null: "image:..." names are refused).
  void SetImagePuller(ImagePuller* p) { state_.images = p; }
  ImagePuller* image_puller() const { return state_.images; }
  // Removes a built template's name; its build dir goes once no sandbox
  // or snapshot stands on it.
  Status DeleteTemplate(const std::string& name);

  // Where admission reads what the host has (core/admission.h); unset,
  // only the count and committed-memory caps apply.
  void SetHostStats(Admission::StatsSource source) {
    state_.admission.set_stats_source(std::move(source));
  }
  const AdmissionOptions& admission() const { return state_.admission.options(); }

  // Volumes sandboxes may mount (null: a create asking for one fails).
  void SetVolumes(VolumeManager* v) { state_.volumes = v; }
  VolumeManager* volumes() const { return state_.volumes; }
  // Credential vaults (null: the vault routes answer not_supported);
  // forgetting a sandbox drops its vault.
  void SetVaults(VaultBook* v) { state_.vaults = v; }
  VaultBook* vaults() const { return state_.vaults; }
  // Sandbox networking (null: only mode none is available; `why` says why
  // in errors).
  void SetNetwork(net::NetworkManager* n, std::string why) {
    state_.net_manager = n;
    state_.owned_net = n ? std::make_unique<ManagedNetSlots>(n) : nullptr;
    state_.net = state_.owned_net.get();
    state_.net_unavailable = std::move(why);
  }
  net::NetworkManager* network() const { return state_.net_manager; }
  // Networking through another NetSlots (tests of core: no root); the API
  // still sees no NetworkManager.
  void SetNetSlots(NetSlots* slots) { state_.net = slots; }
  // Replaces a running or paused sandbox's egress policy; new connections
  // follow it at once.
  asio::awaitable<Result<SandboxRecord>> SetNetworkPolicy(const std::string& id,
                                                          net::NetworkPolicy p);
  // Sandboxes that have the volume mounted (starting, running or paused).
  std::vector<std::string> VolumeUsers(const std::string& name) const;

  // At start, before serving: loads the stored sandboxes, adopts the ones
  // that were running and whose agents still answer, marks the others
  // failed, forgets creates that were never acknowledged, and has the
  // driver remove everything else an earlier run left.
  using RecoverReport = hutch::RecoverReport;
  asio::awaitable<Result<RecoverReport>> Recover();

  asio::awaitable<Result<SandboxRecord>> Create(CreateOptions o);
  // Create under an Idempotency-Key: the same key (per owner_key) with the
  // same canonical body returns the first request's sandbox (*replayed set);
  // another body is a conflict; a retry while the first is still starting
  // waits for it.
  asio::awaitable<Result<SandboxRecord>> CreateIdempotent(CreateOptions o, const std::string& key,
                                                          const std::string& canonical_body,
                                                          bool* replayed);
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
  Result<SandboxRecord> PatchMetadata(
      const std::string& id, const std::map<std::string, std::optional<std::string>>& patch);
  // Snapshots (see core/snapshot.h). The sandbox may be running or paused.
  // `tenant`: asked by a tenant key, so within the owner's quotas.
  asio::awaitable<Result<SnapshotRecord>> Snapshot(const std::string& id, bool tenant = false);
  std::vector<SnapshotRecord> ListSnapshots() const;
  // Host dirs that sandboxes and kept snapshots stand on (template build
  // dirs among them are not collected while listed here).
  std::set<std::string> UsedLowerDirs() const;
  Result<SnapshotRecord> GetSnapshot(const std::string& id) const;
  Status DeleteSnapshot(const std::string& id);
  // Snapshot names (SnapshotRecord::name): give one, find one by owner.
  Result<SnapshotRecord> NameSnapshot(const std::string& id, const std::string& name) {
    return snaps_.Name(id, name);
  }
  Result<SnapshotRecord> SnapshotNamed(const std::string& owner, const std::string& name) const {
    return snaps_.Named(owner, name);
  }
  // `count` new sandboxes from the current files of a running or paused
  // one (copy-on-write layers; processes are not copied).
  asio::awaitable<Result<std::vector<SandboxRecord>>> Fork(const std::string& id, int count,
                                                           const std::string& owner_key,
                                                           bool tenant = false);

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
  // Sandboxes started ahead of demand, nobody's yet (core/warm_pool.h).
  size_t warm_count() const { return warm_.size(); }
  const ManagerOptions& options() const { return state_.opts; }
  // Sandboxes by status, stopped tombstones included (for /metrics).
  std::map<SandboxStatus, size_t> CountByStatus() const {
    std::map<SandboxStatus, size_t> n;
    for (const auto& [id, sb] : state_.sandboxes) ++n[sb->rec.status];
    return n;
  }

  // Awaited after every create and fork succeeded, before the caller gets
  // the sandbox (a cluster node records where the sandbox lives before the
  // create is acknowledged: src/cluster). Unset: nothing.
  using CreatedHook = std::function<asio::awaitable<void>(const SandboxRecord&)>;
  void SetCreatedHook(CreatedHook h) { created_hook_ = std::move(h); }
  // Ids of the sandboxes this host holds (stopped tombstones left out).
  std::vector<std::string> SandboxIds() const {
    std::vector<std::string> out;
    for (const auto& [id, sb] : state_.sandboxes)
      if (sb->rec.status != SandboxStatus::kStopped) out.push_back(id);
    return out;
  }

  // Every sandbox's event log (core/event_log.h).
  const EventLog& events() const { return state_.events; }

  // The parts, for tests of core that drive them directly.
  Reaper& reaper() { return reaper_; }

 private:
  ManagerState state_;
  SnapshotBook snaps_;
  SandboxLifecycle life_;
  WarmPool warm_;
  Reaper reaper_;
  CreatedHook created_hook_;
};

}  // namespace hutch
