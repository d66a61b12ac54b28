#include "core/idempotency.h"

#include <spdlog/spdlog.h>

#include "common/sha256.h"
#include "store/state_store.h"

namespace hutch {

Status IdempotencyCache::Attach(store::StateStore* store) {
  store_ = store;
  auto rows = store->LoadIdempotency();
  if (!rows.ok()) return rows.error();
  for (auto& r : *rows) {
    entries_[r.scope + '\n' + r.key] =
        Entry{r.body_hash, r.sandbox_id, FromUnixMs(r.created_at_ms)};
  }
  return Status{};
}

IdempotencyCache::Lookup IdempotencyCache::Claim(const std::string& scope, const std::string& key,
                                                 const std::string& body) {
  std::string k = scope + '\n' + key;
  std::string hash = Sha256Hex(body);
  auto it = entries_.find(k);
  if (it == entries_.end()) {
    entries_[k] = Entry{hash, "", std::chrono::system_clock::now()};
    return {State::kNew, ""};
  }
  if (it->second.body_hash != hash) return {State::kMismatch, ""};
  if (it->second.sandbox_id.empty()) return {State::kPending, ""};
  return {State::kDone, it->second.sandbox_id};
}

Status IdempotencyCache::Complete(const std::string& scope, const std::string& key,
                                  const std::string& sandbox_id) {
  auto it = entries_.find(scope + '\n' + key);
  if (it == entries_.end()) return Status{};
  it->second.sandbox_id = sandbox_id;
  if (!store_) return Status{};
  return store_->PutIdempotency(
      store::IdempotencyRow{scope, key, it->second.body_hash, sandbox_id, ToUnixMs(it->second.at)});
}

void IdempotencyCache::Abandon(const std::string& scope, const std::string& key) {
  entries_.erase(scope + '\n' + key);
}

void IdempotencyCache::Prune(SysTime now) {
  bool pruned = false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.sandbox_id.empty() && now - it->second.at > keep_) {
      it = entries_.erase(it);
      pruned = true;
    } else {
      ++it;
    }
  }
  if (pruned && store_) {
    if (auto st = store_->PruneIdempotency(ToUnixMs(now - keep_)); !st.ok())
      spdlog::error("idempotency_prune_failed err=\"{}\"", st.error().message);
  }
}

}  // namespace hutch
