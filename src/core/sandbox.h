// A sandbox as core sees it: its record (what the API shows) and, while it
// runs, the driver instance. Owned by SandboxManager; touched only on the
// I/O thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "core/volume.h"
#include "driver/driver.h"
#include "net/net_policy.h"

namespace hutch {

enum class SandboxStatus { kStarting, kRunning, kPaused, kStopped, kFailed };
const char* StatusName(SandboxStatus s);
bool ParseStatus(const std::string& s, SandboxStatus* out);

struct SandboxRecord {
  std::string id;
  std::string template_name;
  SandboxStatus status = SandboxStatus::kStarting;
  std::string reason;  // why it stopped or failed
  SysTime created_at;
  SysTime expires_at;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env;
  double cpu = 1;
  int64_t memory_mb = 512;
  int64_t disk_mb = 2048;
  std::string driver;
  std::string owner_key;  // hash of the API key that created it
  std::string snapshot;   // the snapshot it was created from ("" if none)
  // Its read-only stack: layers (topmost first: snapshot layers, then the
  // template's own) over rootfs (the template's bottom). Kept per sandbox,
  // so a template rebuilt or removed meanwhile does not move it.
  std::vector<std::string> layers;
  std::string rootfs;
  // Defaults of its commands, from its template (empty: root, the home dir).
  std::string user;
  std::string workdir;
  std::vector<VolumeMountRequest> volumes;  // mounted at create, by name
  // Idle policy: pause after this many seconds without a request or an open
  // stream (0: never); the next request resumes it.
  int64_t auto_pause_seconds = 0;
  bool auto_paused = false;  // paused by the idle policy, not by the API
  // At its TTL it is paused instead of deleted (E2B's autoPause), and kept
  // paused for the server's largest TTL (a frozen sandbox still holds its
  // memory), then deleted; a resume gives it a TTL again.
  bool pause_on_expiry = false;
  net::NetworkPolicy network;  // mode none: loopback only
  int net_slot = -1;           // its subnet in the network pool (-1: none)
  // How its instance came up ("cold", "restore", "fork"; "" for drivers
  // with one way), shown as "boot".
  std::string boot;

  // The API's view (no env, no owner).
  nlohmann::json ToJson() const;
  // Everything, for the state store; FromStoreJson is its inverse.
  std::string ToStoreJson() const;
  static bool FromStoreJson(const std::string& text, SandboxRecord* out);
};

class EventLog;

// Background processes started through hutchd whose exit is not in the
// sandbox's event log yet, and when to ask the agent next
// (core/process_exit_watch.h). Not persisted: after a restart the
// processes still running are found again by the first poll.
struct ProcessExitWatch {
  std::map<int, std::string> pids;  // pid -> its command, for the event's message
  std::chrono::steady_clock::time_point next_poll;
  std::chrono::milliseconds gap{500};
  bool polling = false;
  bool rediscover = false;  // adopted: take every running background process
};

struct Sandbox {
  SandboxRecord rec;
  std::shared_ptr<Instance> instance;  // null unless starting/running
  bool deleting = false;
  // Set while the instance of a failed sandbox is being torn down in the
  // background (its processes exiting, its disk unmounting); cancelled when
  // that is done, so a delete can wait for it: once a delete is answered,
  // nothing of the sandbox is left on the host.
  std::shared_ptr<asio::steady_timer> teardown;
  // Last time a request used it (for the idle policy); not persisted: a
  // restarted hutchd counts from its start.
  std::chrono::steady_clock::time_point last_active = std::chrono::steady_clock::now();
  // Where its events go (core/event_log.h). Null until the sandbox is the
  // API's (its create answered, a warm one claimed, one adopted at start),
  // so a create's own work (the template's start command, its ready
  // checks) is not logged as the user's commands.
  EventLog* events = nullptr;
  ProcessExitWatch exits;
};

}  // namespace hutch
