// StateStore: hutchd's durable state in one SQLite file in the state dir.
//
// What the API acknowledged must survive `kill -9` of hutchd: every write
// here commits before the caller answers. WAL mode with synchronous=NORMAL
// makes a commit durable against a process crash (the log is in the page
// cache the kernel keeps); `Durability::kFull` also fsyncs each commit, for
// power loss, at the cost of a disk flush per write.
//
// The store keeps rows, not domain objects: core serializes a sandbox's
// record and its driver's adoption facts to JSON text, so this layer has no
// dependency on core or drivers. Used from the I/O thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

struct sqlite3;

namespace hutch::store {

enum class Durability { kNormal, kFull };

struct SandboxRow {
  std::string id;
  std::string status;
  int64_t expires_at_ms = 0;  // unix ms
  std::string record;         // JSON: SandboxRecord (core)
  std::string instance;       // JSON: the driver's adoption facts, "" if none
};

struct IdempotencyRow {
  std::string scope;  // hash of the API key
  std::string key;    // the client's Idempotency-Key
  std::string body_hash;
  std::string sandbox_id;
  int64_t created_at_ms = 0;
};

// One entry of a sandbox's event log (core/event_log.h): `seq` counts from 1
// per sandbox, `level` is the level's rank (higher is more severe) so a
// query can ask for "this level and above".
struct EventRow {
  std::string sandbox_id;
  int64_t seq = 0;
  int64_t time_ms = 0;  // unix ms
  int level = 0;
  std::string type;
  std::string message;
  std::string fields;  // JSON object text
};

// Which of a sandbox's events LoadEvents returns: seq > after_seq, time at
// or after since_ms, level at least min_level; the oldest `limit` of them.
struct EventQuery {
  int64_t after_seq = 0;
  int64_t since_ms = 0;
  int min_level = 0;
  int64_t limit = 100;
};

struct ApiKeyRow {
  std::string hash;
  std::string label;
  int64_t created_at_ms = 0;  // 0: now (AddApiKey)
  std::string tenant;         // "" for a key that is its own owner
  std::string role;           // "admin" or "tenant" ("" → admin)
};

class StateStore {
 public:
  // Opens (creating if needed) <path>, applies the schema migrations.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& path,
                                                  Durability d = Durability::kNormal);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Sandboxes.
  Status PutSandbox(const SandboxRow& row);  // insert or replace
  Status DeleteSandbox(const std::string& id);
  Result<std::vector<SandboxRow>> LoadSandboxes();

  // Idempotency records.
  Status PutIdempotency(const IdempotencyRow& row);
  Status DeleteIdempotency(const std::string& scope, const std::string& key);
  Status PruneIdempotency(int64_t older_than_ms);
  Result<std::vector<IdempotencyRow>> LoadIdempotency();

  // Snapshots: id -> JSON record (core's SnapshotRecord).
  Status PutSnapshot(const std::string& id, const std::string& record);
  Status DeleteSnapshot(const std::string& id);
  Result<std::vector<std::pair<std::string, std::string>>> LoadSnapshots();

  // Volumes: name -> JSON record (core's VolumeRecord).
  Status PutVolume(const std::string& name, const std::string& record);
  Status DeleteVolume(const std::string& name);
  Result<std::vector<std::pair<std::string, std::string>>> LoadVolumes();

  // Built templates: name -> JSON record (core's TemplateRecord).
  Status PutTemplate(const std::string& name, const std::string& record);
  Status DeleteTemplate(const std::string& name);
  Result<std::vector<std::pair<std::string, std::string>>> LoadTemplates();

  // Sandbox event logs. AppendEvents writes a batch in one transaction (one
  // commit, one fsync under kFull) and keeps only the newest `keep` events
  // of each sandbox it touches, so a log never grows past its cap however
  // long the sandbox lives.
  Status AppendEvents(const std::vector<EventRow>& rows, int64_t keep);
  Result<std::vector<EventRow>> LoadEvents(const std::string& sandbox_id, const EventQuery& q);
  Status DeleteEvents(const std::string& sandbox_id);
  // The last seq of every sandbox that has events, after dropping the logs
  // of sandboxes the store no longer has (a crash between the two deletes).
  Result<std::vector<std::pair<std::string, int64_t>>> LoadEventHeads();

  // Credential vaults: sandbox id -> JSON record (core's VaultBook: the
  // bindings, and each credential's value sealed, never in plain text).
  Status PutVault(const std::string& sandbox_id, const std::string& record);
  Status DeleteVault(const std::string& sandbox_id);
  Result<std::vector<std::pair<std::string, std::string>>> LoadVaults();

  // API keys, by SHA-256 hex of the key (the key itself is never stored),
  // with their tenant and role (auth/principal.h).
  Status AddApiKey(const ApiKeyRow& row);
  Status DeleteApiKey(const std::string& hash);
  Result<std::vector<ApiKeyRow>> LoadApiKeys();

  const std::string& path() const { return path_; }

 private:
  StateStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status Exec(const std::string& sql);
  Status Migrate();

  sqlite3* db_;
  std::string path_;
};

}  // namespace hutch::store
