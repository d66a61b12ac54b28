#include "api/mcp/mcp_sessions.h"

#include "common/clock.h"

namespace hutch::api::mcp {

void Session::Cancel(const std::string& key) {
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return;
  auto hook = it->second;  // the hook may untrack itself
  if (hook) hook();
}

void Session::Close() {
  closed_ = true;
  auto hooks = in_flight_;
  for (auto& [k, hook] : hooks)
    if (hook) hook();
}

std::shared_ptr<Session> SessionTable::Create(const std::string& owner,
                                              const std::string& version) {
  Expire();
  size_t mine = 0;
  for (const auto& [id, s] : sessions_) mine += s->owner() == owner;
  if (mine >= kPerOwner) EvictOldest(&owner);
  if (sessions_.size() >= kMaxSessions) EvictOldest(nullptr);
  // 128 random bits: the id is a capability only together with the key.
  auto s = std::make_shared<Session>("mcp_" + RandomHex(16), owner, version);
  sessions_[s->id()] = s;
  return s;
}

std::shared_ptr<Session> SessionTable::Find(const std::string& id, const std::string& owner) {
  Expire();
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner() != owner) return nullptr;
  it->second->last_used_ = std::chrono::steady_clock::now();
  return it->second;
}

bool SessionTable::Remove(const std::string& id, const std::string& owner) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->owner() != owner) return false;
  it->second->Close();
  sessions_.erase(it);
  return true;
}

void SessionTable::Expire() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    // A session with a request still running is in use, however long.
    if (now - it->second->last_used_ > kIdle && it->second->in_flight_.empty()) {
      it->second->Close();
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

void SessionTable::EvictOldest(const std::string* owner) {
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (owner && it->second->owner() != *owner) continue;
    if (oldest == sessions_.end() || it->second->last_used_ < oldest->second->last_used_)
      oldest = it;
  }
  if (oldest == sessions_.end()) return;
  oldest->second->Close();
  sessions_.erase(oldest);
}

}  // namespace hutch::api::mcp
