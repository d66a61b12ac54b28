#include "core/idempotency.h"

namespace hutch {

IdempotencyCache::Lookup IdempotencyCache::Claim(const std::string& scope, const std::string& key,
                                                 const std::string& body) {
  std::string k = scope + '\n' + key;
  auto it = entries_.find(k);
  if (it == entries_.end()) {
    entries_[k] = Entry{body, "", std::chrono::system_clock::now()};
    return {State::kNew, ""};
  }
  if (it->second.body != body) return {State::kMismatch, ""};
  if (it->second.sandbox_id.empty()) return {State::kPending, ""};
  return {State::kDone, it->second.sandbox_id};
}

void IdempotencyCache::Complete(const std::string& scope, const std::string& key, const std::string& sandbox_id) {
  auto it = entries_.find(scope + '\n' + key);
  if (it != entries_.end()) it->second.sandbox_id = sandbox_id;
}

void IdempotencyCache::Abandon(const std::string& scope, const std::string& key) {
  entries_.erase(scope + '\n' + key);
}

void IdempotencyCache::Prune(SysTime now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.sandbox_id.empty() && now - it->second.at > keep_) it = entries_.erase(it);
    else ++it;
  }
}

}  // namespace hutch
