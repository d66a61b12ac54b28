// EventLog: what happened to each sandbox, as a person watching it (the
// web console's Events tab) or a client paging through it reads it — its
// create, start, pauses, TTL changes, the commands it ran and how they
// ended, its failure and its end. docs/api.md "Events" lists the types.
//
// Each sandbox's log is a sequence numbered from 1, kept in the state
// store's `sandbox_events` table so it survives a restart with the
// sandbox, and bounded: only the newest `cap` events (1000 by default) are
// kept, older ones are dropped as new ones arrive. The log goes when the
// sandbox's record goes (ManagerState::Forget: its tombstone expired), so
// a deleted sandbox's events stay readable as long as the sandbox itself
// (GET shows it stopped, --tombstone-ttl). Without a store nothing is kept
// (a manager without a store persists nothing).
//
// Recording never fails the operation it describes: a store error is
// logged and the event lost. Nor does it cost the operation a commit:
// events wait in memory and go to the store in batches, one transaction
// per flush (a busy exec path would otherwise pay two commits, and under
// --durability full two fsyncs, per command). A flush happens when a
// record finds the oldest waiting event kFlushAfter old, on the reaper's
// tick (every 250 ms), before every read, and when the log is destroyed,
// so readers never miss an event and a kill -9 loses at most the last
// quarter second of them. I/O thread only, as the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "store/state_store.h"

namespace hutch {

// Ordered by severity: a query for a level returns it and those above.
enum class EventLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
const char* LevelName(EventLevel l);
bool ParseLevel(const std::string& s, EventLevel* out);

struct SandboxEvent {
  int64_t seq = 0;
  SysTime time;
  EventLevel level = EventLevel::kInfo;
  std::string type;     // one snake_case word: "created", "process_exited", ...
  std::string message;  // one line for people
  nlohmann::json fields = nlohmann::json::object();  // the facts, by name

  // {"seq","time","level","type","message","fields"} (docs/api.md).
  nlohmann::json ToJson() const;
};

struct EventFilter {
  int64_t after_seq = 0;         // only events after this one
  std::optional<SysTime> since;  // only events at or after this time
  EventLevel min_level = EventLevel::kDebug;
  size_t limit = 100;
};

class EventLog {
 public:
  static constexpr int64_t kDefaultCap = 1000;

  // `store` may be null: then Record keeps nothing and Read finds nothing.
  explicit EventLog(store::StateStore* store, int64_t cap = kDefaultCap)
      : store_(store), cap_(cap) {}
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // At start, once the sandboxes are loaded: where each log goes on from
  // (and the logs of sandboxes the store no longer has are dropped).
  Status Load();
  // Appends an event to `sandbox_id`'s log.
  void Record(const std::string& sandbox_id, EventLevel level, std::string type,
              std::string message, nlohmann::json fields = nlohmann::json::object());
  // The oldest events of the log that pass `f`, in order.
  Result<std::vector<SandboxEvent>> Read(const std::string& sandbox_id, const EventFilter& f) const;
  // The seq of the log's last event (0: none yet): a follower compares it
  // with what it sent to know whether to read.
  int64_t last_seq(const std::string& sandbox_id) const;
  // Drops the sandbox's log (its record is gone).
  void Forget(const std::string& sandbox_id);
  // Writes the waiting events to the store (one transaction).
  void Flush() const;
  // Flushes if the oldest waiting event has waited kFlushAfter.
  void FlushIfDue() const;
  int64_t cap() const { return cap_; }

  ~EventLog() { Flush(); }

  static constexpr std::chrono::milliseconds kFlushAfter{250};

 private:
  store::StateStore* store_;
  int64_t cap_;
  std::map<std::string, int64_t> last_;  // sandbox id -> last seq
  // Recorded, not yet in the store. Mutable: a const Read flushes them
  // first, so what it returns is everything recorded.
  mutable std::vector<store::EventRow> pending_;
  mutable std::chrono::steady_clock::time_point oldest_pending_;
};

}  // namespace hutch
