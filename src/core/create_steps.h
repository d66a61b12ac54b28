// The resources a sandbox create acquires, each held by an owner that
// gives it back unless the create commits it. A create that fails at any
// step just returns: what it acquired so far is released in reverse order,
// awaited by CreateSteps::Unwind on the failure path (so the answer goes
// out only once nothing is left), or by the owners' destructors if the
// create's coroutine is destroyed unfinished (then the asynchronous ones,
// an instance and a network slot, are released on the executor).
// I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>

#include "core/manager_state.h"

namespace hutch {

// The create counted against the caps while it is in flight.
class StartingCount {
 public:
  explicit StartingCount(int& n) : n_(&n) { ++*n_; }
  ~StartingCount() { Release(); }
  StartingCount(const StartingCount&) = delete;
  StartingCount& operator=(const StartingCount&) = delete;
  void Release() {
    if (n_) --*std::exchange(n_, nullptr);
  }

 private:
  int* n_;
};

// The sandbox's entry in the registry (status starting). A sandbox
// deleted while its create ran keeps its entry: the tombstone is Delete's.
class RegistryEntry {
 public:
  RegistryEntry(ManagerState& s, std::shared_ptr<Sandbox> sb) : s_(&s), sb_(std::move(sb)) {
    s.sandboxes[sb_->rec.id] = sb_;
  }
  ~RegistryEntry() { Release(); }
  RegistryEntry(const RegistryEntry&) = delete;
  RegistryEntry& operator=(const RegistryEntry&) = delete;
  const std::string& id() const { return sb_->rec.id; }
  void Commit() { s_ = nullptr; }
  void Release() {
    if (s_ && !sb_->deleting) s_->sandboxes.erase(sb_->rec.id);
    s_ = nullptr;
  }

 private:
  ManagerState* s_;
  std::shared_ptr<Sandbox> sb_;
};

// The sandbox's instance and network slot (sb->instance, sb->rec.net_slot)
// while its create runs: destroyed, then the slot freed (it must outlive
// the processes). Read from the sandbox itself, so a Delete that took them
// meanwhile leaves nothing to release twice.
class SandboxResources {
 public:
  SandboxResources(ManagerState& s, std::shared_ptr<Sandbox> sb) : s_(&s), sb_(std::move(sb)) {}
  ~SandboxResources();
  SandboxResources(const SandboxResources&) = delete;
  SandboxResources& operator=(const SandboxResources&) = delete;
  // The sandbox owns them now.
  void Commit() { sb_.reset(); }
  asio::awaitable<void> Release();

 private:
  ManagerState* s_;
  std::shared_ptr<Sandbox> sb_;
};

// Everything one create holds, in acquisition order.
// Members are declared in acquisition order, so they are destroyed newest
// first.
struct CreateSteps {
  // Gives back what is held, newest first.
  asio::awaitable<void> Unwind() {
    if (resources) co_await resources->Release();
    resources.reset();
    entry.reset();
    starting.reset();
  }
  // The create succeeded: the registry and the sandbox keep what it made.
  void Commit() {
    if (resources) resources->Commit();
    if (entry) entry->Commit();
    starting.reset();
  }

  std::unique_ptr<StartingCount> starting;
  std::unique_ptr<RegistryEntry> entry;
  std::unique_ptr<SandboxResources> resources;
};

}  // namespace hutch
