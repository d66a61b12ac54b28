// Idempotency-Key records for sandbox creation (api-v1.md): the same key
// with the same body returns the sandbox the first request made; the same
// key with another body is a conflict. Keys are scoped by API key and kept
// 24 hours. In memory for now: they live as long as the sandboxes they
// point to (neither survives a restart until state moves to the store).
// Used on the I/O thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"

namespace hutch {

class IdempotencyCache {
 public:
  enum class State { kNew, kPending, kDone, kMismatch };
  struct Lookup {
    State state = State::kNew;
    std::string sandbox_id;  // kDone
  };
  explicit IdempotencyCache(std::chrono::seconds keep = std::chrono::hours(24)) : keep_(keep) {}

  // Claims `key` for `body` when it is new (state kNew: the caller creates
  // and then calls Complete or Abandon).
  Lookup Claim(const std::string& scope, const std::string& key, const std::string& body);
  void Complete(const std::string& scope, const std::string& key, const std::string& sandbox_id);
  void Abandon(const std::string& scope, const std::string& key);
  void Prune(SysTime now);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string body;
    std::string sandbox_id;  // empty while pending
    SysTime at;
  };
  std::chrono::seconds keep_;
  std::map<std::string, Entry> entries_;  // scope + '\n' + key
};

}  // namespace hutch
