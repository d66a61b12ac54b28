#include "core/manager_state.h"

#include <spdlog/spdlog.h>

namespace hutch {

Error SandboxNotFound(const std::string& id) {
  return MakeError(Code::kSandboxNotFound, "sandbox " + id + " not found");
}

Status ManagerState::Persist(const Sandbox& sb) {
  if (!store) return Status{};
  store::SandboxRow row;
  row.id = sb.rec.id;
  row.status = StatusName(sb.rec.status);
  row.expires_at_ms = ToUnixMs(sb.rec.expires_at);
  row.record = sb.rec.ToStoreJson();
  if (sb.instance) row.instance = sb.instance->AdoptionFacts();
  auto st = store->PutSandbox(row);
  if (!st.ok())
    spdlog::error("sandbox={} persist_failed err=\"{}\"", sb.rec.id, st.error().message);
  return st;
}

Status ManagerState::PersistSnapshot(const SnapshotRecord& snap) {
  if (!store) return Status{};
  return store->PutSnapshot(snap.id, snap.ToStoreJson());
}

void ManagerState::Forget(const std::string& id) {
  sandboxes.erase(id);
  events.Forget(id);
  // The vault first in memory: no request matches it from here on.
  if (vaults) vaults->Forget(id);
  if (!store) return;
  if (auto st = store->DeleteSandbox(id); !st.ok())
    spdlog::error("sandbox={} forget_failed err=\"{}\"", id, st.error().message);
}

Result<Driver*> ManagerState::PickDriver(const std::string& name) const {
  if (name.empty()) return driver;
  if (auto it = drivers.find(name); it != drivers.end()) return it->second;
  if (auto it = unavailable_drivers.find(name); it != unavailable_drivers.end())
    return MakeError(Code::kNotSupported,
                     "driver '" + name + "' is not available on this server: " + it->second);
  std::string known;
  for (const auto& [n, d] : drivers) known += (known.empty() ? "" : ", ") + n;
  return MakeError(Code::kInvalidRequest,
                   "unknown driver '" + name + "' (this server has: " + known + ")");
}

asio::awaitable<void> ManagerState::Teardown(std::shared_ptr<Instance> inst, int net_slot) {
  if (inst) co_await inst->Destroy();
  // After the processes: nothing is left to use the namespace.
  if (net_slot >= 0 && net) co_await net->Release(net_slot);
}

size_t ManagerState::running_count() const {
  size_t n = 0;
  for (const auto& [id, sb] : sandboxes)
    if (sb->rec.status == SandboxStatus::kRunning || sb->rec.status == SandboxStatus::kPaused) ++n;
  return n;
}

int ManagerState::live_count(const std::string& owner) const {
  int n = 0;
  for (const auto& [id, sb] : sandboxes)
    if (sb->rec.owner_key == owner && IsLive(sb->rec.status)) ++n;
  return n;
}

int64_t ManagerState::committed_memory_mb() const {
  int64_t mb = 0;
  for (const auto& [id, sb] : sandboxes)
    if (IsLive(sb->rec.status)) mb += sb->rec.memory_mb;
  return mb;
}

HostLoad ManagerState::Load() const {
  HostLoad l;
  l.live = static_cast<int>(running_count());
  l.starting = starting;
  l.warm = static_cast<int>(warm.size());
  // committed_memory_mb counts the starting sandboxes the registry holds;
  // warm ones (and those starting for the pool) are outside it.
  l.committed_mb = committed_memory_mb();
  for (const auto& [id, sb] : warm) l.committed_mb += sb->rec.memory_mb;
  return l;
}

Status ManagerState::Admit(int count, int64_t memory_mb) const {
  return admission.Check(Load(), Demand{count, memory_mb});
}

}  // namespace hutch
