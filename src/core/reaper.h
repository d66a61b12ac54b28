// Reaper: the manager's timed and collecting work — every 250 ms it
// deletes sandboxes past their TTL, forgets tombstones past theirs, prunes
// idempotency records and pauses sandboxes idle past auto_pause_seconds;
// and it removes templates, whose build dirs go once no sandbox or
// snapshot stands on them. One part of SandboxManager (see
// manager_state.h). I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "core/manager_state.h"

namespace hutch {

class SandboxLifecycle;
class SnapshotBook;
class WarmPool;

class Reaper {
 public:
  // `warm` (may be null) is topped up on every tick.
  Reaper(ManagerState& s, SandboxLifecycle& life, SnapshotBook& snaps, WarmPool* warm = nullptr)
      : s_(s), life_(life), snaps_(snaps), warm_(warm) {}
  // Starts the loop on `ex`; it ends once the manager shuts down.
  void Start(asio::any_io_executor ex);
  // One pass of the loop (tests drive it directly).
  asio::awaitable<void> Tick();
  // Pauses running sandboxes idle for longer than their auto_pause_seconds.
  void PauseIdle();
  // A sandbox with pause_on_expiry at its TTL: paused and kept; false when
  // that failed (it is then deleted as any expired sandbox).
  bool PauseAtExpiry(const std::string& id);
  Status DeleteTemplate(const std::string& name);

 private:
  asio::awaitable<void> Loop();

  ManagerState& s_;
  SandboxLifecycle& life_;
  SnapshotBook& snaps_;
  WarmPool* warm_;
};

}  // namespace hutch
