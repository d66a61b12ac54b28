// Idempotency-Key records for sandbox creation (api-v1.md): the same key
// with the same body returns the sandbox the first request made; the same
// key with another body is a conflict. Keys are scoped by API key and kept
// 24 hours. Completed records are written through to the state store (as
// the body's SHA-256, never the body), so a retry after a hutchd restart
// still finds its sandbox; a claim still pending when hutchd dies was never
// answered and is forgotten. Used on the I/O thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/result.h"

namespace hutch::store {
class StateStore;
}

namespace hutch {

class IdempotencyCache {
 public:
  enum class State { kNew, kPending, kDone, kMismatch };
  struct Lookup {
    State state = State::kNew;
    std::string sandbox_id;  // kDone
  };
  explicit IdempotencyCache(std::chrono::seconds keep = std::chrono::hours(24)) : keep_(keep) {}
  // Writes through to `store` from now on and loads the records it holds.
  Status Attach(store::StateStore* store);

  // Claims `key` for `body` when it is new (state kNew: the caller creates
  // and then calls Complete or Abandon).
  Lookup Claim(const std::string& scope, const std::string& key, const std::string& body);
  // Records the sandbox the claim created; the error is the store's.
  Status Complete(const std::string& scope, const std::string& key, const std::string& sandbox_id);
  void Abandon(const std::string& scope, const std::string& key);
  void Prune(SysTime now);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string body_hash;
    std::string sandbox_id;  // empty while pending
    SysTime at;
  };
  std::chrono::seconds keep_;
  store::StateStore* store_ = nullptr;
  std::map<std::string, Entry> entries_;  // scope + '\n' + key
};

}  // namespace hutch
