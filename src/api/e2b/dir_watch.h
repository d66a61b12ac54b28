// Watching a directory for E2B's WatchDir / CreateWatcher, by polling: the
// agent lists the directory (recursively when asked) and consecutive
// listings are compared. A new entry is a create (plus a write when it is
// a file that already has content), a vanished one a remove, a file whose
// size or mtime changed a write, a changed mode a chmod. Events are
// coalesced per poll (two writes between polls are one), mtime has whole
// seconds, and renames show as remove + create: docs/compat-e2b.md.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "core/sandbox.h"

namespace hutch::api::e2b {

// filesystem.EventType numbers.
enum WatchEventType {
  kWatchCreate = 1,
  kWatchWrite = 2,
  kWatchRemove = 3,
  kWatchRename = 4,
  kWatchChmod = 5
};
const char* WatchEventTypeName(int t);

struct WatchEntry {
  std::string type;  // the agent's: file, dir, symlink, other
  int64_t size = 0;
  std::string mtime;  // as the listing gives it (compared, not interpreted)
  int mode = 0;
};
// By path relative to the watched directory.
using WatchSnapshot = std::map<std::string, WatchEntry>;

struct WatchEvent {
  std::string name;  // relative to the watched directory
  int type = 0;
};

// The agent's list answer ({"entries":[...]}) of `root`, as a snapshot.
WatchSnapshot SnapshotFromListing(const nlohmann::json& listing, const std::string& root);
std::vector<WatchEvent> DiffSnapshots(const WatchSnapshot& before, const WatchSnapshot& after);

class DirWatcher {
 public:
  DirWatcher(std::string sandbox_id, std::string path, bool recursive, std::string user)
      : sandbox_id_(std::move(sandbox_id)),
        path_(std::move(path)),
        recursive_(recursive),
        user_(std::move(user)) {}
  // Lists the directory; the first call only records it. Returns what
  // changed since the previous call.
  asio::awaitable<Result<std::vector<WatchEvent>>> Poll(std::shared_ptr<Sandbox> sb);
  const std::string& sandbox_id() const { return sandbox_id_; }

 private:
  std::string sandbox_id_, path_;
  bool recursive_;
  std::string user_;
  bool primed_ = false;
  WatchSnapshot last_;
};

}  // namespace hutch::api::e2b
