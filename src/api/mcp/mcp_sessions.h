// MCP sessions of the Streamable HTTP transport: an id handed out by
// initialize (Mcp-Session-Id), the key's owner it belongs to, the protocol
// revision agreed, and the requests in flight on it (so a
// notifications/cancelled, or the session's end, stops them).
//
// Bounded: a session unused for an hour is forgotten, an owner holds at
// most kPerOwner sessions and the server kMaxSessions (the least recently
// used goes first), so clients that never say goodbye cannot grow hutchd.
// Everything runs on the I/O thread: no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace hutch::api::mcp {

class Session {
 public:
  Session(std::string id, std::string owner, std::string version)
      : id_(std::move(id)), owner_(std::move(owner)), version_(std::move(version)) {}
  const std::string& id() const { return id_; }
  const std::string& owner() const { return owner_; }
  const std::string& version() const { return version_; }
  bool closed() const { return closed_; }

  // Registers the cancel hook of request `key` (its id, as JSON text)
  // while it runs; Untrack when it ends.
  void Track(const std::string& key, std::function<void()> cancel) { in_flight_[key] = cancel; }
  void Untrack(const std::string& key) { in_flight_.erase(key); }
  // notifications/cancelled: stops that request if it still runs.
  void Cancel(const std::string& key);
  // The session ends (DELETE, eviction): every request in flight stops.
  void Close();

 private:
  friend class SessionTable;
  std::string id_, owner_, version_;
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
  std::map<std::string, std::function<void()>> in_flight_;
  bool closed_ = false;
};

class SessionTable {
 public:
  static constexpr size_t kPerOwner = 64;
  static constexpr size_t kMaxSessions = 4096;
  static constexpr std::chrono::minutes kIdle{60};

  std::shared_ptr<Session> Create(const std::string& owner, const std::string& version);
  // The session `id` of `owner` (marked used), or null: unknown, expired
  // or another owner's (the same answer, so ids cannot be probed).
  std::shared_ptr<Session> Find(const std::string& id, const std::string& owner);
  bool Remove(const std::string& id, const std::string& owner);
  size_t size() const { return sessions_.size(); }

 private:
  void Expire();
  void EvictOldest(const std::string* owner);
  std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace hutch::api::mcp
