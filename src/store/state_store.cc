#include "store/state_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "common/clock.h"

namespace hutch::store {

namespace {

Error DbError(sqlite3* db, const std::string& what) {
  // A full disk under the state dir is the operator's to fix, and clients
  // should see it for what it is (507 storage_full), not as a hutch bug.
  const int ext = db ? sqlite3_extended_errcode(db) : 0;
  const bool full =
      db && ((ext & 0xff) == SQLITE_FULL || ext == SQLITE_IOERR_WRITE || ext == SQLITE_IOERR_FSYNC);
  return MakeError(full ? Code::kStorageFull : Code::kInternal,
                   "state store: " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

// A prepared statement, finalized on scope exit. Binds are 1-based.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return rc_ == SQLITE_OK && st_ != nullptr; }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(st_); }
  // Ready to run again with new binds (a statement reused in a loop).
  void Reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(st_, col);
    int n = sqlite3_column_bytes(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
             : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(st_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  int rc_;
};

// Runs a write statement to completion.
Status RunWrite(sqlite3* db, Stmt& st, const char* what) {
  if (!st.ok()) return DbError(db, std::string("prepare ") + what);
  int rc = st.Step();
  if (rc != SQLITE_DONE) return DbError(db, what);
  return Status{};
}

// Every row of a two-text-column query (the key -> JSON record tables).
Result<std::vector<std::pair<std::string, std::string>>> LoadPairs(sqlite3* db, const char* sql,
                                                                   const std::string& what) {
  Stmt st(db, sql);
  if (!st.ok()) return DbError(db, "prepare load " + what);
  std::vector<std::pair<std::string, std::string>> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) out.emplace_back(st.Text(0), st.Text(1));
  if (rc != SQLITE_DONE) return DbError(db, "load " + what);
  return out;
}

// Schema versions, applied in order; PRAGMA user_version records how many
// ran. Never edit a released step: append a new one.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE sandboxes (
      id TEXT PRIMARY KEY,
      status TEXT NOT NULL,
      expires_at_ms INTEGER NOT NULL,
      record TEXT NOT NULL,
      instance TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE idempotency (
      scope TEXT NOT NULL,
      key TEXT NOT NULL,
      body_hash TEXT NOT NULL,
      sandbox_id TEXT NOT NULL,
      created_at_ms INTEGER NOT NULL,
      PRIMARY KEY (scope, key)
    );
    CREATE TABLE api_keys (
      hash TEXT PRIMARY KEY,
      label TEXT NOT NULL,
      created_at_ms INTEGER NOT NULL
    );
    )sql",
    R"sql(
    CREATE TABLE snapshots (
      id TEXT PRIMARY KEY,
      record TEXT NOT NULL
    );
    )sql",
    R"sql(
    CREATE TABLE volumes (
      name TEXT PRIMARY KEY,
      record TEXT NOT NULL
    );
    )sql",
    R"sql(
    CREATE TABLE templates (
      name TEXT PRIMARY KEY,
      record TEXT NOT NULL
    );
    )sql",
    // Key roles and tenants (issue 32 #13): every key stored before them
    // keeps working as the admin key it was.
    R"sql(
    ALTER TABLE api_keys ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
    )sql",
    // Per-sandbox event logs (issue 28): keyed by (sandbox, seq), so a
    // page and the cap's trim are range scans of one sandbox's rows.
    R"sql(
    CREATE TABLE sandbox_events (
      sandbox_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      time_ms INTEGER NOT NULL,
      level INTEGER NOT NULL,
      type TEXT NOT NULL,
      message TEXT NOT NULL,
      fields TEXT NOT NULL,
      PRIMARY KEY (sandbox_id, seq)
    ) WITHOUT ROWID;
    )sql",
    // Credential vaults (issue 26): one row per sandbox that has one.
    R"sql(
    CREATE TABLE vaults (
      sandbox_id TEXT PRIMARY KEY,
      record TEXT NOT NULL
    );
    )sql",
};

}  // namespace

Result<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path, Durability d) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error e = DbError(db, "open " + path);
    sqlite3_close(db);
    return e;
  }
  std::unique_ptr<StateStore> s(new StateStore(db, path));
  std::string pragmas = std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=") +
                        (d == Durability::kFull ? "FULL" : "NORMAL") + "; PRAGMA foreign_keys=ON;";
  if (auto st = s->Exec(pragmas); !st.ok()) return st.error();
  if (auto st = s->Migrate(); !st.ok()) return st.error();
  return s;
}

StateStore::~StateStore() { sqlite3_close(db_); }

Status StateStore::Exec(const std::string& sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : "unknown error";
    sqlite3_free(msg);
    return MakeError(Code::kInternal, "state store " + path_ + ": " + m);
  }
  return Status{};
}

Status StateStore::Migrate() {
  int64_t version = 0;
  {
    Stmt st(db_, "PRAGMA user_version");
    if (!st.ok() || st.Step() != SQLITE_ROW) return DbError(db_, "read schema version");
    version = st.Int(0);
  }
  const int64_t known = static_cast<int64_t>(std::size(kMigrations));
  if (version > known)
    return MakeError(Code::kInternal, "state store " + path_ + " has schema version " +
                                          std::to_string(version) + ", newer than this hutchd (" +
                                          std::to_string(known) + ")");
  for (int64_t v = version; v < known; ++v) {
    std::string sql = std::string("BEGIN IMMEDIATE;") + kMigrations[v] +
                      "PRAGMA user_version=" + std::to_string(v + 1) + "; COMMIT;";
    if (auto st = Exec(sql); !st.ok()) {
      Exec("ROLLBACK;").ok();
      return st.error().Context("migrate to schema " + std::to_string(v + 1));
    }
  }
  return Status{};
}

Status StateStore::PutSandbox(const SandboxRow& row) {
  Stmt st(db_,
          "INSERT OR REPLACE INTO sandboxes (id, status, expires_at_ms, record, instance) VALUES "
          "(?,?,?,?,?)");
  st.Bind(1, row.id);
  st.Bind(2, row.status);
  st.Bind(3, row.expires_at_ms);
  st.Bind(4, row.record);
  st.Bind(5, row.instance);
  return RunWrite(db_, st, "put sandbox");
}

Status StateStore::DeleteSandbox(const std::string& id) {
  Stmt st(db_, "DELETE FROM sandboxes WHERE id = ?");
  st.Bind(1, id);
  return RunWrite(db_, st, "delete sandbox");
}

Result<std::vector<SandboxRow>> StateStore::LoadSandboxes() {
  Stmt st(db_, "SELECT id, status, expires_at_ms, record, instance FROM sandboxes ORDER BY id");
  if (!st.ok()) return DbError(db_, "prepare load sandboxes");
  std::vector<SandboxRow> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    out.push_back(SandboxRow{st.Text(0), st.Text(1), st.Int(2), st.Text(3), st.Text(4)});
  }
  if (rc != SQLITE_DONE) return DbError(db_, "load sandboxes");
  return out;
}

Status StateStore::PutIdempotency(const IdempotencyRow& row) {
  Stmt st(db_,
          "INSERT OR REPLACE INTO idempotency (scope, key, body_hash, sandbox_id, created_at_ms) "
          "VALUES (?,?,?,?,?)");
  st.Bind(1, row.scope);
  st.Bind(2, row.key);
  st.Bind(3, row.body_hash);
  st.Bind(4, row.sandbox_id);
  st.Bind(5, row.created_at_ms);
  return RunWrite(db_, st, "put idempotency record");
}

Status StateStore::DeleteIdempotency(const std::string& scope, const std::string& key) {
  Stmt st(db_, "DELETE FROM idempotency WHERE scope = ? AND key = ?");
  st.Bind(1, scope);
  st.Bind(2, key);
  return RunWrite(db_, st, "delete idempotency record");
}

Status StateStore::PruneIdempotency(int64_t older_than_ms) {
  Stmt st(db_, "DELETE FROM idempotency WHERE created_at_ms < ?");
  st.Bind(1, older_than_ms);
  return RunWrite(db_, st, "prune idempotency records");
}

Result<std::vector<IdempotencyRow>> StateStore::LoadIdempotency() {
  Stmt st(db_, "SELECT scope, key, body_hash, sandbox_id, created_at_ms FROM idempotency");
  if (!st.ok()) return DbError(db_, "prepare load idempotency");
  std::vector<IdempotencyRow> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    out.push_back(IdempotencyRow{st.Text(0), st.Text(1), st.Text(2), st.Text(3), st.Int(4)});
  }
  if (rc != SQLITE_DONE) return DbError(db_, "load idempotency records");
  return out;
}

Status StateStore::PutSnapshot(const std::string& id, const std::string& record) {
  Stmt st(db_, "INSERT OR REPLACE INTO snapshots (id, record) VALUES (?,?)");
  st.Bind(1, id);
  st.Bind(2, record);
  return RunWrite(db_, st, "put snapshot");
}

Status StateStore::DeleteSnapshot(const std::string& id) {
  Stmt st(db_, "DELETE FROM snapshots WHERE id = ?");
  st.Bind(1, id);
  return RunWrite(db_, st, "delete snapshot");
}

Result<std::vector<std::pair<std::string, std::string>>> StateStore::LoadSnapshots() {
  return LoadPairs(db_, "SELECT id, record FROM snapshots ORDER BY id", "snapshots");
}

Status StateStore::PutVolume(const std::string& name, const std::string& record) {
  Stmt st(db_, "INSERT OR REPLACE INTO volumes (name, record) VALUES (?,?)");
  st.Bind(1, name);
  st.Bind(2, record);
  return RunWrite(db_, st, "put volume");
}

Status StateStore::DeleteVolume(const std::string& name) {
  Stmt st(db_, "DELETE FROM volumes WHERE name = ?");
  st.Bind(1, name);
  return RunWrite(db_, st, "delete volume");
}

Result<std::vector<std::pair<std::string, std::string>>> StateStore::LoadVolumes() {
  return LoadPairs(db_, "SELECT name, record FROM volumes ORDER BY name", "volumes");
}

Status StateStore::PutTemplate(const std::string& name, const std::string& record) {
  Stmt st(db_, "INSERT OR REPLACE INTO templates (name, record) VALUES (?,?)");
  st.Bind(1, name);
  st.Bind(2, record);
  return RunWrite(db_, st, "put template");
}

Status StateStore::DeleteTemplate(const std::string& name) {
  Stmt st(db_, "DELETE FROM templates WHERE name = ?");
  st.Bind(1, name);
  return RunWrite(db_, st, "delete template");
}

Result<std::vector<std::pair<std::string, std::string>>> StateStore::LoadTemplates() {
  return LoadPairs(db_, "SELECT name, record FROM templates ORDER BY name", "templates");
}

Status StateStore::AppendEvents(const std::vector<EventRow>& rows, int64_t keep) {
  if (rows.empty()) return Status{};
  if (auto st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
  Status out = [&]() -> Status {
    Stmt ins(db_,
             "INSERT OR REPLACE INTO sandbox_events (sandbox_id, seq, time_ms, level, type, "
             "message, fields) VALUES (?,?,?,?,?,?,?)");
    std::map<std::string, int64_t> last;  // sandbox id -> its newest seq in the batch
    for (const EventRow& row : rows) {
      ins.Reset();
      ins.Bind(1, row.sandbox_id);
      ins.Bind(2, row.seq);
      ins.Bind(3, row.time_ms);
      ins.Bind(4, static_cast<int64_t>(row.level));
      ins.Bind(5, row.type);
      ins.Bind(6, row.message);
      ins.Bind(7, row.fields);
      if (auto st = RunWrite(db_, ins, "append event"); !st.ok()) return st;
      int64_t& l = last[row.sandbox_id];
      l = std::max(l, row.seq);
    }
    Stmt trim(db_, "DELETE FROM sandbox_events WHERE sandbox_id = ? AND seq <= ?");
    for (const auto& [id, seq] : last) {
      if (seq <= keep) continue;
      trim.Reset();
      trim.Bind(1, id);
      trim.Bind(2, seq - keep);
      if (auto st = RunWrite(db_, trim, "trim events"); !st.ok()) return st;
    }
    return Status{};
  }();
  if (!out.ok()) {
    Exec("ROLLBACK").ok();
    return out;
  }
  return Exec("COMMIT");
}

Result<std::vector<EventRow>> StateStore::LoadEvents(const std::string& sandbox_id,
                                                     const EventQuery& q) {
  Stmt st(db_,
          "SELECT seq, time_ms, level, type, message, fields FROM sandbox_events "
          "WHERE sandbox_id = ? AND seq > ? AND time_ms >= ? AND level >= ? "
          "ORDER BY seq LIMIT ?");
  if (!st.ok()) return DbError(db_, "prepare load events");
  st.Bind(1, sandbox_id);
  st.Bind(2, q.after_seq);
  st.Bind(3, q.since_ms);
  st.Bind(4, static_cast<int64_t>(q.min_level));
  st.Bind(5, q.limit);
  std::vector<EventRow> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW)
    out.push_back(EventRow{sandbox_id, st.Int(0), st.Int(1), static_cast<int>(st.Int(2)),
                           st.Text(3), st.Text(4), st.Text(5)});
  if (rc != SQLITE_DONE) return DbError(db_, "load events");
  return out;
}

Status StateStore::DeleteEvents(const std::string& sandbox_id) {
  Stmt st(db_, "DELETE FROM sandbox_events WHERE sandbox_id = ?");
  st.Bind(1, sandbox_id);
  return RunWrite(db_, st, "delete events");
}

Result<std::vector<std::pair<std::string, int64_t>>> StateStore::LoadEventHeads() {
  {
    Stmt orphans(db_,
                 "DELETE FROM sandbox_events WHERE sandbox_id NOT IN (SELECT id FROM sandboxes)");
    if (auto st = RunWrite(db_, orphans, "drop orphaned events"); !st.ok()) return st.error();
  }
  Stmt st(db_, "SELECT sandbox_id, MAX(seq) FROM sandbox_events GROUP BY sandbox_id");
  if (!st.ok()) return DbError(db_, "prepare load event heads");
  std::vector<std::pair<std::string, int64_t>> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) out.emplace_back(st.Text(0), st.Int(1));
  if (rc != SQLITE_DONE) return DbError(db_, "load event heads");
  return out;
}

Status StateStore::PutVault(const std::string& sandbox_id, const std::string& record) {
  Stmt st(db_, "INSERT OR REPLACE INTO vaults (sandbox_id, record) VALUES (?,?)");
  st.Bind(1, sandbox_id);
  st.Bind(2, record);
  return RunWrite(db_, st, "put vault");
}

Status StateStore::DeleteVault(const std::string& sandbox_id) {
  Stmt st(db_, "DELETE FROM vaults WHERE sandbox_id = ?");
  st.Bind(1, sandbox_id);
  return RunWrite(db_, st, "delete vault");
}

Result<std::vector<std::pair<std::string, std::string>>> StateStore::LoadVaults() {
  return LoadPairs(db_, "SELECT sandbox_id, record FROM vaults ORDER BY sandbox_id", "vaults");
}

Status StateStore::AddApiKey(const ApiKeyRow& row) {
  Stmt st(db_,
          "INSERT OR IGNORE INTO api_keys (hash, label, created_at_ms, tenant, role) "
          "VALUES (?,?,?,?,?)");
  st.Bind(1, row.hash);
  st.Bind(2, row.label);
  st.Bind(3,
          row.created_at_ms != 0 ? row.created_at_ms : ToUnixMs(std::chrono::system_clock::now()));
  st.Bind(4, row.tenant);
  st.Bind(5, row.role.empty() ? std::string("admin") : row.role);
  return RunWrite(db_, st, "add api key");
}

Status StateStore::DeleteApiKey(const std::string& hash) {
  Stmt st(db_, "DELETE FROM api_keys WHERE hash=?");
  st.Bind(1, hash);
  return RunWrite(db_, st, "delete api key");
}

Result<std::vector<ApiKeyRow>> StateStore::LoadApiKeys() {
  Stmt st(db_,
          "SELECT hash, label, created_at_ms, tenant, role FROM api_keys ORDER BY created_at_ms");
  if (!st.ok()) return DbError(db_, "prepare load api keys");
  std::vector<ApiKeyRow> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW)
    out.push_back({st.Text(0), st.Text(1), st.Int(2), st.Text(3), st.Text(4)});
  if (rc != SQLITE_DONE) return DbError(db_, "load api keys");
  return out;
}

}  // namespace hutch::store
