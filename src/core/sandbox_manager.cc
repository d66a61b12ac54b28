#include "core/sandbox_manager.h"

#include <boost/asio/this_coro.hpp>

namespace hutch {

std::vector<std::string> SandboxManager::driver_names() const {
  std::vector<std::string> out;
  for (const auto& [name, d] : state_.drivers) out.push_back(name);
  return out;
}

asio::awaitable<Result<SandboxManager::RecoverReport>> SandboxManager::Recover() {
  RecoverReport rep;
  state_.ex = co_await asio::this_coro::executor;
  std::set<std::string> keep;
  if (state_.store) {
    if (auto st = snaps_.Load(); !st.ok()) co_return st.error();
    // Before the sandboxes: adopting one logs an event, after its last seq.
    if (auto st = state_.events.Load(); !st.ok()) co_return st.error();
    if (auto st = co_await life_.Recover(&rep, &keep); !st.ok()) co_return st.error();
    if (auto st = state_.idempotency.Attach(state_.store); !st.ok())
      co_return st.error().Context("recover idempotency keys");
  }
  for (const auto& [name, d] : state_.drivers) rep.removed += d->ReconcileAtStart(keep);
  if (state_.net) rep.removed += co_await state_.net->ReconcileAtStart();
  snaps_.CleanAtStart();
  co_return rep;
}

asio::awaitable<Result<SandboxRecord>> SandboxManager::Create(CreateOptions o) {
  auto rec = co_await life_.Create(std::move(o));
  if (rec.ok() && created_hook_) co_await created_hook_(*rec);
  co_return rec;
}

asio::awaitable<Result<SandboxRecord>> SandboxManager::CreateIdempotent(
    CreateOptions o, const std::string& key, const std::string& canonical_body, bool* replayed) {
  auto rec = co_await life_.CreateIdempotent(std::move(o), key, canonical_body, replayed);
  if (rec.ok() && created_hook_ && !*replayed) co_await created_hook_(*rec);
  co_return rec;
}

Result<std::shared_ptr<Sandbox>> SandboxManager::GetRunning(const std::string& id) {
  return life_.GetRunning(id);
}
Result<SandboxRecord> SandboxManager::Get(const std::string& id) { return life_.Get(id); }
ListPage SandboxManager::List(const ListFilter& f) { return life_.List(f); }

asio::awaitable<Status> SandboxManager::Delete(const std::string& id, const std::string& reason) {
  return life_.Delete(id, reason);
}

Result<SandboxRecord> SandboxManager::SetTtl(const std::string& id, int64_t ttl_seconds) {
  return life_.SetTtl(id, ttl_seconds);
}

Result<SandboxRecord> SandboxManager::PatchMetadata(
    const std::string& id, const std::map<std::string, std::optional<std::string>>& patch) {
  return life_.PatchMetadata(id, patch);
}

Result<SandboxRecord> SandboxManager::Pause(const std::string& id, bool idle) {
  return life_.Pause(id, idle);
}
Result<SandboxRecord> SandboxManager::Resume(const std::string& id) { return life_.Resume(id); }

asio::awaitable<Result<SandboxRecord>> SandboxManager::SetNetworkPolicy(const std::string& id,
                                                                        net::NetworkPolicy p) {
  return life_.SetNetworkPolicy(id, std::move(p));
}

std::vector<std::string> SandboxManager::VolumeUsers(const std::string& name) const {
  return life_.VolumeUsers(name);
}

asio::awaitable<Result<SnapshotRecord>> SandboxManager::Snapshot(const std::string& id,
                                                                 bool tenant) {
  return snaps_.Snapshot(id, tenant);
}
std::vector<SnapshotRecord> SandboxManager::ListSnapshots() const { return snaps_.List(); }
std::set<std::string> SandboxManager::UsedLowerDirs() const { return snaps_.UsedLowerDirs(); }
Result<SnapshotRecord> SandboxManager::GetSnapshot(const std::string& id) const {
  return snaps_.Get(id);
}
Status SandboxManager::DeleteSnapshot(const std::string& id) { return snaps_.Delete(id); }

asio::awaitable<Result<std::vector<SandboxRecord>>> SandboxManager::Fork(
    const std::string& id, int count, const std::string& owner_key, bool tenant) {
  auto kids = co_await snaps_.Fork(id, count, owner_key, tenant);
  if (kids.ok() && created_hook_)
    for (const auto& r : *kids) co_await created_hook_(r);
  co_return kids;
}

Status SandboxManager::DeleteTemplate(const std::string& name) {
  return reaper_.DeleteTemplate(name);
}
void SandboxManager::StartReaper(asio::any_io_executor ex) { reaper_.Start(ex); }
asio::awaitable<void> SandboxManager::Shutdown() {
  co_await life_.Shutdown();
  co_await warm_.Shutdown();
}
size_t SandboxManager::running_count() const { return state_.running_count(); }
int64_t SandboxManager::committed_memory_mb() const { return state_.committed_memory_mb(); }

}  // namespace hutch
