// SnapshotBook: snapshots and forks — taking a sandbox's writable layer as
// a snapshot, the records of snapshots, forks (an internal snapshot, or
// the whole machine where the driver can copy it, and its children), and
// collecting the files of deleted snapshots once nothing stands on them.
// One part of SandboxManager (see manager_state.h). I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/manager_state.h"

namespace hutch {

class SandboxLifecycle;

class SnapshotBook {
 public:
  explicit SnapshotBook(ManagerState& s) : s_(s) {}
  void set_lifecycle(SandboxLifecycle* l) { life_ = l; }

  // At start: the stored snapshot records.
  Status Load();
  // At start, after adoption: removes layer dirs without a record (their
  // capture was cut by a crash) and collects deleted snapshots.
  void CleanAtStart();

  // `tenant`: within the sandbox owner's snapshot quotas.
  asio::awaitable<Result<SnapshotRecord>> Snapshot(const std::string& id, bool tenant = false);
  std::vector<SnapshotRecord> List() const;
  Result<SnapshotRecord> Get(const std::string& id) const;
  // Gives snapshot `id` the name `name`, taking it from any other snapshot
  // of the same owner (SnapshotRecord::name).
  Result<SnapshotRecord> Name(const std::string& id, const std::string& name);
  // The owner's listed snapshot called `name`.
  Result<SnapshotRecord> Named(const std::string& owner, const std::string& name) const;
  Status Delete(const std::string& id);
  // `tenant`: the children count against owner_key's sandbox quota.
  asio::awaitable<Result<std::vector<SandboxRecord>>> Fork(const std::string& id, int count,
                                                           const std::string& owner_key,
                                                           bool tenant = false);
  // Host dirs that sandboxes and kept snapshots stand on.
  std::set<std::string> UsedLowerDirs() const;
  // Removes the files and rows of deleted snapshots nothing stands on.
  void Collect();

 private:
  asio::awaitable<Result<SnapshotRecord>> Take(Sandbox& sb, bool internal);

  // The owner's snapshot quotas, counting the takes still copying.
  Status CheckQuota(const std::string& owner) const;

  ManagerState& s_;
  SandboxLifecycle* life_ = nullptr;
  std::map<std::string, int> taking_;  // owner id -> API snapshots being copied
};

}  // namespace hutch
