#include "tests/core/core_fixture.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <fstream>

namespace hutch::testing {

namespace fs = std::filesystem;

asio::awaitable<Result<net::NetLease>> FakeNetSlots::Acquire(const net::NetworkPolicy& p) {
  if (fail_acquire) co_return *std::exchange(fail_acquire, std::nullopt);
  net::NetLease l;
  l.slot = next_++;
  l.netns_path = "/fake/netns/" + std::to_string(l.slot);
  l.gateway = "10.0.0.1";
  leased_.insert(l.slot);
  policy[l.slot] = p.mode;
  co_return l;
}

asio::awaitable<Status> FakeNetSlots::SetPolicy(int slot, const net::NetworkPolicy& p) {
  if (fail_set_policy) co_return *std::exchange(fail_set_policy, std::nullopt);
  if (!leased_.count(slot)) co_return MakeError(Code::kInternal, "slot not leased");
  policy[slot] = p.mode;
  co_return Status{};
}

asio::awaitable<void> FakeNetSlots::Release(int slot) {
  ++releases;
  if (!leased_.erase(slot)) ++double_releases;
  co_return;
}

asio::awaitable<Result<net::NetLease>> FakeNetSlots::Adopt(int slot, const net::NetworkPolicy& p) {
  if (fail_adopt) co_return *std::exchange(fail_adopt, std::nullopt);
  if (!leased_.count(slot)) co_return MakeError(Code::kUnavailable, "slot gone");
  adopted_.insert(slot);
  policy[slot] = p.mode;
  net::NetLease l;
  l.slot = slot;
  co_return l;
}

asio::awaitable<int> FakeNetSlots::ReconcileAtStart() {
  int n = 0;
  for (auto it = leased_.begin(); it != leased_.end();) {
    if (adopted_.count(*it)) {
      ++it;
      continue;
    }
    it = leased_.erase(it);
    ++n;
  }
  adopted_.clear();
  co_return n;
}

void CoreTest::SetUp() {
  char tmpl[] = "/tmp/hutch-core-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  dir = tmpl;
  fs::create_directories(dir + "/templates/base/rootfs");
  std::ofstream(dir + "/templates/base/template.json") << "{}";
  fs::create_directories(dir + "/sockets");
  fs::create_directories(dir + "/snapshots");
  opts.snapshots_dir = dir + "/snapshots";
  opts.default_ttl_seconds = 600;
  auto s = store::StateStore::Open(dir + "/state.db");
  ASSERT_TRUE(s.ok()) << s.error().message;
  store = std::move(*s);
  TemplateRegistryOptions to;
  to.dir = dir + "/templates";
  to.builds_dir = dir + "/builds";
  to.aliases_file = dir + "/aliases.toml";
  templates = std::make_unique<TemplateRegistry>(to, store.get());
  ASSERT_TRUE(templates->Load().ok());
  driver = std::make_unique<fake::FakeDriver>(dir + "/sockets");
  Restart();
}

void CoreTest::TearDown() {
  if (mgr) Run(mgr->Shutdown());
  Poll();
  mgr.reset();
  Poll();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void CoreTest::Run(asio::awaitable<void> a) {
  bool done = false;
  asio::co_spawn(
      io,
      [](asio::awaitable<void> a, bool* done) -> asio::awaitable<void> {
        co_await std::move(a);
        *done = true;
      }(std::move(a), &done),
      asio::detached);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "a core call did not finish within 20 s";
      std::abort();
    }
  }
  Poll();
}

void CoreTest::Poll() {
  for (int i = 0; i < 5; ++i) {
    io.restart();
    io.run_for(std::chrono::milliseconds(1));
  }
}

void CoreTest::Sleep(std::chrono::milliseconds d) {
  io.restart();
  io.run_for(d);
}

SandboxManager::RecoverReport CoreTest::Restart() {
  driver->DropObjects();
  mgr.reset();
  Poll();
  mgr = std::make_unique<SandboxManager>(opts, driver.get(), templates.get(), store.get());
  mgr->SetNetSlots(&net);
  if (host_stats) mgr->SetHostStats(host_stats);
  auto rep = Run(mgr->Recover());
  EXPECT_TRUE(rep.ok()) << rep.error().message;
  return rep.ok() ? *rep : SandboxManager::RecoverReport{};
}

Result<SandboxRecord> CoreTest::Create(CreateOptions o) { return Run(mgr->Create(std::move(o))); }

SandboxRecord CoreTest::MustCreate(CreateOptions o) {
  auto r = Create(std::move(o));
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : SandboxRecord{};
}

std::map<std::string, std::string> CoreTest::StoredSandboxes() {
  std::map<std::string, std::string> out;
  auto rows = store->LoadSandboxes();
  EXPECT_TRUE(rows.ok());
  if (rows.ok())
    for (const auto& r : *rows) out[r.id] = r.status;
  return out;
}

namespace {
void Exec(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}
}  // namespace

void CoreTest::BreakStoreWrites(const std::string& table) {
  Exec(dir + "/state.db", "CREATE TRIGGER fail_" + table + " BEFORE INSERT ON " + table +
                              " BEGIN SELECT RAISE(ABORT, 'injected write failure'); END;");
}

void CoreTest::FixStoreWrites(const std::string& table) {
  Exec(dir + "/state.db", "DROP TRIGGER fail_" + table);
}

TemplateRecord CoreTest::AddTemplate(const std::string& name, const std::string& start,
                                     const std::string& ready, int64_t ready_timeout_seconds,
                                     const std::string& hash) {
  TemplateRecord r;
  r.name = name;
  r.hash = hash.empty() ? "h" + name : hash;
  r.from = "base";
  r.info.name = name;
  r.info.hash = r.hash;
  r.info.rootfs = dir + "/templates/base/rootfs";
  r.info.layers = {dir + "/builds/" + r.hash + "/layer"};
  r.info.start = start;
  r.info.ready = ready;
  r.info.ready_timeout_seconds = ready_timeout_seconds;
  fs::create_directories(r.info.layers[0]);
  EXPECT_TRUE(templates->Register(r).ok());
  return r;
}

size_t CoreTest::CountEntries(const std::string& d) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

void CoreTest::ExpectNothingHeld() {
  Poll();
  EXPECT_TRUE(driver->live().empty()) << driver->live().size() << " instances left";
  EXPECT_EQ(driver->starting, 0);
  EXPECT_TRUE(net.leased().empty()) << net.leased().size() << " network slots left";
  EXPECT_EQ(net.double_releases, 0);
  EXPECT_EQ(mgr->running_count(), 0u);
  EXPECT_EQ(mgr->committed_memory_mb(), 0);
  auto by = mgr->CountByStatus();
  EXPECT_EQ(by[SandboxStatus::kStarting], 0u);
  EXPECT_EQ(by[SandboxStatus::kRunning], 0u);
  EXPECT_EQ(by[SandboxStatus::kPaused], 0u);
  for (const auto& [id, st] : StoredSandboxes())
    EXPECT_TRUE(st == "stopped" || st == "failed") << id << " " << st;
  EXPECT_EQ(CountEntries(dir + "/sockets"), 0u) << "agent sockets left";
}

}  // namespace hutch::testing
