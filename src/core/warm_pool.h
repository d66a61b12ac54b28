// WarmPool: sandboxes started ahead of demand for the templates the
// operator names (`hutchd --warm-pool NAME=N`), so a create that matches
// takes one that already runs its template's start command and passed its
// ready check (a code-interpreter sandbox's kernel is up) instead of
// paying for all that on the request.
//
// A warm sandbox is nobody's until a create claims it: it is not in the
// registry (no list, get or delete sees it) and not in the store (a
// crashed hutchd's leftovers are removed at the next start like any
// unknown instance). A claim gives it its owner, TTL and metadata, then
// registers and persists it: from then on it is an ordinary sandbox; it is
// never handed out twice. Only a create that asks for nothing a running
// sandbox cannot take afterwards matches: the same template build, driver,
// cpu, memory, disk and network mode (none or all, no rules), no env of
// its own (the start command already ran with the template's env), no
// volumes, no snapshot. The shape a pool keeps is the last create's of its
// template, so clients with other defaults (E2B asks for network all,
// /v1 for none) get warm sandboxes after their first create.
//
// The pool is filled one sandbox at a time from the reaper's tick, only
// while admission (core/admission.h) has room for one more, warm ones
// counted; a create the host has no room for makes the pool give one up
// (a warm sandbox must never be why a create is refused). A template whose
// warm start failed is retried after a pause.
// I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/manager_state.h"

namespace hutch {

class SandboxLifecycle;

// What a create asks for, after defaults, as far as a warm sandbox must
// match it.
struct WarmShape {
  std::string template_name;  // resolved (aliases followed)
  std::string build;          // the template's build hash: a rebuild is another shape
  std::string driver;
  double cpu = 0;
  int64_t memory_mb = 0;
  int64_t disk_mb = 0;
  net::NetMode network = net::NetMode::kNone;
  bool operator==(const WarmShape&) const = default;
};

class WarmPool {
 public:
  WarmPool(ManagerState& s, SandboxLifecycle& life) : s_(s), life_(life) {}
  // Templates (their names or aliases as given) and how many to keep.
  void Configure(const std::map<std::string, int>& targets);
  // A warm sandbox of exactly `shape` (taken out of the pool), or null.
  // Either way the shape becomes the one the pool keeps for its template.
  std::shared_ptr<Sandbox> Take(const WarmShape& shape);
  // Drops sandboxes no target wants any more and starts filling if the
  // pool is short (in the background; one fill at a time).
  void Tick();
  // Destroys every warm sandbox, after a fill under way has finished.
  asio::awaitable<void> Shutdown();
  size_t size() const { return s_.warm.size(); }
  // Gives one warm sandbox up (its place at once, its memory once torn
  // down) for a create the host has no room for; false if none is kept.
  bool Yield(const char* why);

 private:
  struct Target {
    int count = 0;
    std::optional<WarmShape> shape;  // the last create's; until then the defaults
    std::chrono::steady_clock::time_point retry_after{};
  };
  // One warm sandbox for target `name`; one at a time (filling_).
  asio::awaitable<void> Fill(std::string name, WarmShape shape);
  // The shape a template's pool keeps now, or nullopt if it cannot be made.
  std::optional<WarmShape> WantedShape(const std::string& name, Target& t) const;
  bool HostHasRoom(int64_t memory_mb) const;
  // The template a target names, if it is built (no fallback to base).
  Result<TemplateInfo> ResolveTarget(const std::string& name) const;
  void Drop(const std::string& id, const char* why);

  ManagerState& s_;
  SandboxLifecycle& life_;
  std::map<std::string, Target> targets_;    // by the name configured
  std::map<std::string, WarmShape> shapes_;  // of the sandboxes in s_.warm, by id
  bool filling_ = false;
};

}  // namespace hutch
