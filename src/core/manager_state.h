// ManagerState: what the parts of SandboxManager share — the registry of
// sandboxes and snapshots, the drivers, the store, and the small helpers
// every part uses (persisting a record, tearing an instance down). The
// parts (SandboxLifecycle, SnapshotBook, Reaper) each own one concern and
// work on this state; SandboxManager wires them and keeps the API.
// I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <string>

#include "core/admission.h"
#include "core/event_log.h"
#include "core/idempotency.h"
#include "core/image_puller.h"
#include "core/net_slots.h"
#include "core/sandbox.h"
#include "core/snapshot.h"
#include "core/template_builder.h"
#include "core/templates.h"
#include "core/tenant_quotas.h"
#include "core/vault_book.h"
#include "core/volume_manager.h"
#include "driver/driver.h"
#include "store/state_store.h"

namespace hutch {

struct ManagerOptions {
  int64_t default_ttl_seconds = 300;
  int64_t max_ttl_seconds = 24 * 3600;
  // Host-wide admission (core/admission.h): the count cap, the opt-in
  // sum-of-limits cap, and what the host must keep free.
  int max_sandboxes = 200;
  // Sum of memory_mb over starting, running, paused and warm sandboxes
  // that the host accepts (their hard limits); 0 = no cap.
  int64_t max_memory_committed_mb = 0;
  int64_t memory_reserve_mb = 1024;
  double memory_pressure_max = 10;
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
  // Templates (name or alias) and how many sandboxes of each to keep
  // started ahead of demand (core/warm_pool.h).
  std::map<std::string, int> warm_pool;
  // Events kept per sandbox (core/event_log.h; the oldest go first).
  int64_t events_per_sandbox = EventLog::kDefaultCap;
  // What a tenant key's owner id may hold (admin keys are exempt).
  TenantQuotas quotas;
};

struct ManagerState {
  ManagerState(ManagerOptions o, Driver* d, TemplateRegistry* t, store::StateStore* s)
      : opts(std::move(o)),
        admission(AdmissionOptions{opts.max_sandboxes, opts.max_memory_committed_mb,
                                   opts.memory_reserve_mb, opts.memory_pressure_max}),
        driver(d),
        templates(t),
        store(s),
        events(s, opts.events_per_sandbox) {
    drivers[d->name()] = d;
  }

  ManagerOptions opts;
  Admission admission;
  Driver* driver;  // the default
  std::map<std::string, Driver*> drivers;
  std::map<std::string, std::string> unavailable_drivers;
  TemplateRegistry* templates;
  store::StateStore* store;
  VolumeManager* volumes = nullptr;
  VaultBook* vaults = nullptr;  // null: no sandbox has a vault
  TemplateBuilder* builder = nullptr;
  ImagePuller* images = nullptr;               // null: image templates are refused
  net::NetworkManager* net_manager = nullptr;  // what the API reads; null in tests
  NetSlots* net = nullptr;                     // what core uses (null: mode none only)
  std::unique_ptr<NetSlots> owned_net;
  std::string net_unavailable = "networking is not configured";
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes;  // ordered: cursor paging
  std::map<std::string, SnapshotRecord> snapshots;
  // WarmPool's sandboxes: started, nobody's yet (not in `sandboxes`).
  std::map<std::string, std::shared_ptr<Sandbox>> warm;
  int starting = 0;  // creates between their checks and their driver's answer
  IdempotencyCache idempotency;
  EventLog events;  // every sandbox's event log
  asio::any_io_executor ex;
  bool shutting_down = false;

  // Writes the sandbox's record (and its instance's adoption facts) to the
  // store; a no-op without a store.
  Status Persist(const Sandbox& sb);
  Status PersistSnapshot(const SnapshotRecord& s);
  // Drops a sandbox from the registry and the store, its event log too.
  void Forget(const std::string& id);
  // The driver a create names (empty: the default), or why there is none.
  Result<Driver*> PickDriver(const std::string& name) const;
  // Destroys a sandbox's instance, then frees its network slot.
  asio::awaitable<void> Teardown(std::shared_ptr<Instance> inst, int net_slot);
  size_t running_count() const;
  int64_t committed_memory_mb() const;
  // What admission counts now: live, starting and warm sandboxes and the
  // sum of their memory limits.
  HostLoad Load() const;
  // Room on the host for `count` more sandboxes of `memory_mb` (see
  // core/admission.h), or capacity_exhausted.
  Status Admit(int count, int64_t memory_mb) const;
  // Live sandboxes (starting ones too) created under this owner id.
  int live_count(const std::string& owner) const;
};

// Starting, running or paused: it holds (or is about to hold) an instance.
inline bool IsLive(SandboxStatus s) {
  return s == SandboxStatus::kStarting || s == SandboxStatus::kRunning ||
         s == SandboxStatus::kPaused;
}

Error SandboxNotFound(const std::string& id);

}  // namespace hutch
