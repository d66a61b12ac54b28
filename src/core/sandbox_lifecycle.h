// SandboxLifecycle: the sandbox state machine — create (with its
// idempotency keys), adopt at start, pause/resume, TTL and metadata
// changes, failure and delete. One part of SandboxManager (see
// manager_state.h); snapshots and forks are SnapshotBook's, the timed work
// the Reaper's. I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/manager_state.h"
#include "core/warm_pool.h"

namespace hutch {

class SnapshotBook;
struct CreateSteps;

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
  // "" (an admin key): any snapshot, volume and template. Else an owner id:
  // only its own snapshots and volumes, and templates that are public or
  // its own; anything else reads as not found (issue 32 #13).
  std::string scope;
  // Count against owner_key's tenant quotas (a tenant key; a non-empty
  // `scope` implies it). A fork's children set it without a scope.
  bool tenant = false;
  std::string snapshot;  // start from this snapshot instead of a template
  // Read-only layers to run on when `snapshot` is empty (fork: its
  // internal snapshot's stack, which the API cannot name).
  std::vector<std::string> layers;
  std::string rootfs;  // with `layers`: the bottom under them
  std::vector<VolumeMountRequest> volumes;
  int64_t auto_pause_seconds = 0;
  bool pause_on_expiry = false;  // SandboxRecord::pause_on_expiry
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
  std::string owner;          // when non-empty, only sandboxes of this owner id (a tenant's list)
  std::string template_name;  // when non-empty, only sandboxes of this template
  std::optional<SysTime> created_after;  // only sandboxes created at or after it
  size_t limit = 50;
  std::string cursor;  // last id of the previous page
};

struct ListPage {
  std::vector<SandboxRecord> items;
  std::string next_cursor;  // empty when this is the last page
};

struct RecoverReport {
  int adopted = 0, lost = 0, expired = 0, forgotten = 0, removed = 0;
};

// Mode none or all without rules: what a warm sandbox can be made with
// before anyone asks (a policy's rules are the caller's).
bool IsWarmableNetwork(const net::NetworkPolicy& p);

class SandboxLifecycle {
 public:
  SandboxLifecycle(ManagerState& s, SnapshotBook& snaps) : s_(s), snaps_(snaps) {}
  // Where creates look for a warm sandbox first (null: none).
  void set_warm_pool(WarmPool* w) { warm_ = w; }

  // Loads the stored sandboxes and adopts the live ones (see
  // SandboxManager::Recover); `keep` gets the adopted ids.
  asio::awaitable<Status> Recover(RecoverReport* rep, std::set<std::string>* keep);
  asio::awaitable<Result<SandboxRecord>> Create(CreateOptions o);
  asio::awaitable<Result<SandboxRecord>> CreateIdempotent(CreateOptions o, const std::string& key,
                                                          const std::string& canonical_body,
                                                          bool* replayed);
  Result<std::shared_ptr<Sandbox>> GetRunning(const std::string& id);
  Result<SandboxRecord> Get(const std::string& id);
  ListPage List(const ListFilter& f);
  asio::awaitable<Status> Delete(const std::string& id, const std::string& reason);
  Result<SandboxRecord> SetTtl(const std::string& id, int64_t ttl_seconds);
  Result<SandboxRecord> PatchMetadata(
      const std::string& id, const std::map<std::string, std::optional<std::string>>& patch);
  Result<SandboxRecord> Pause(const std::string& id, bool idle);
  Result<SandboxRecord> Resume(const std::string& id);
  asio::awaitable<Result<SandboxRecord>> SetNetworkPolicy(const std::string& id,
                                                          net::NetworkPolicy p);
  std::vector<std::string> VolumeUsers(const std::string& name) const;
  // running/paused -> failed (its instance died on its own); the kernel
  // resources are freed in the background, the record stays.
  void MarkFailed(const std::string& id, const std::string& reason);
  asio::awaitable<void> Shutdown();
  // A sandbox of `shape`, started and past its template's ready check, that
  // belongs to nobody yet (WarmPool's); not registered, not persisted.
  asio::awaitable<Result<std::shared_ptr<Sandbox>>> CreateWarm(const WarmShape& shape);
  // Room on the host for `count` sandboxes of `memory_mb` (core/admission.h);
  // when there is none the warm pool gives its sandboxes up first, one at a
  // time, before the answer is capacity_exhausted.
  Status Admit(int count, int64_t memory_mb);

 private:
  // Every step of a create; on error the caller unwinds `steps`.
  asio::awaitable<Result<SandboxRecord>> CreateIn(CreateSteps& steps, CreateOptions o);
  // A create's instance: network slot, the driver's instance, the
  // template's start command and ready check (the record says what).
  asio::awaitable<Status> Launch(CreateSteps& steps, std::shared_ptr<Sandbox> sb, Driver* drv,
                                 const TemplateInfo& tpl, std::vector<InstanceMount> mounts,
                                 std::shared_ptr<MachineImage> machine);
  // A warm sandbox becomes the create's: owner, TTL, metadata; registered
  // and persisted.
  asio::awaitable<Result<SandboxRecord>> Claim(CreateSteps& steps, std::shared_ptr<Sandbox> sb,
                                               CreateOptions& o, int64_t ttl);
  // A template's start command (in the background) and ready check (polled
  // until it exits 0), before a create is answered.
  asio::awaitable<Status> StartTemplateProcess(std::shared_ptr<Sandbox> sb,
                                               const TemplateInfo& tpl);
  // Routes the instance's on_lost to MarkFailed.
  void WatchLoss(Sandbox& sb);

  ManagerState& s_;
  SnapshotBook& snaps_;
  WarmPool* warm_ = nullptr;
};

}  // namespace hutch
