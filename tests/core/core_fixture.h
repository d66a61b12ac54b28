// The fixture of the core unit tests: a SandboxManager over the fake driver
// (src/driver/fake), a fake network (FakeNetSlots), and a real state store
// and template registry in a temp dir. No root, no hutchd, one io_context
// run by the test's own thread.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "core/net_slots.h"
#include "core/sandbox_manager.h"
#include "driver/fake/fake_driver.h"
#include "store/state_store.h"

namespace hutch::testing {

namespace asio = boost::asio;

// Network slots as numbers: what is leased, and failures on demand. It
// outlives the managers of a test, as the kernel's namespaces would.
class FakeNetSlots : public NetSlots {
 public:
  asio::awaitable<Result<net::NetLease>> Acquire(const net::NetworkPolicy& policy) override;
  asio::awaitable<Status> SetPolicy(int slot, const net::NetworkPolicy& policy) override;
  asio::awaitable<void> Release(int slot) override;
  asio::awaitable<Result<net::NetLease>> Adopt(int slot, const net::NetworkPolicy& policy) override;
  asio::awaitable<int> ReconcileAtStart() override;

  const std::set<int>& leased() const { return leased_; }
  std::optional<Error> fail_acquire, fail_adopt, fail_set_policy;
  int releases = 0;
  int double_releases = 0;  // a slot released that was not leased
  std::map<int, net::NetMode> policy;

 private:
  std::set<int> leased_;
  std::set<int> adopted_;  // since the last ReconcileAtStart
  int next_ = 0;
};

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs `a` on the io_context until it finishes, then lets what it
  // spawned run (teardowns).
  template <typename T>
  T Run(asio::awaitable<T> a);
  void Run(asio::awaitable<void> a);
  // Starts `a` without waiting; *out is set when it finishes. Arguments
  // the call took by reference must outlive it.
  template <typename T>
  void Spawn(asio::awaitable<T> a, std::optional<T>* out);
  // Runs ready handlers for a moment.
  void Poll();
  void Sleep(std::chrono::milliseconds d);

  // A new manager with `opts` over the same store, driver and network
  // (the old one is dropped without shutdown: a restarted hutchd), after
  // its Recover.
  SandboxManager::RecoverReport Restart();
  Result<SandboxRecord> Create(CreateOptions o = {});
  SandboxRecord MustCreate(CreateOptions o = {});
  std::shared_ptr<fake::FakeInstance> Inst(const std::string& id) { return driver->instance(id); }

  // Rows of the sandboxes table: id -> status.
  std::map<std::string, std::string> StoredSandboxes();
  // Makes every write to `table` fail (a full disk, as the store sees it).
  void BreakStoreWrites(const std::string& table);
  void FixStoreWrites(const std::string& table);
  // Registers a built template with a layer dir under the builds dir
  // (`hash`: its build; default "h" + name).
  TemplateRecord AddTemplate(const std::string& name, const std::string& start = "",
                             const std::string& ready = "", int64_t ready_timeout_seconds = 0,
                             const std::string& hash = "");
  // Entries in a directory (0 if it is missing).
  static size_t CountEntries(const std::string& dir);
  // Nothing of any create is left: no instance, no slot, no row, no agent
  // socket, no starting/running/paused sandbox, no committed memory.
  void ExpectNothingHeld();

  asio::io_context io;
  std::string dir;
  ManagerOptions opts;
  std::unique_ptr<store::StateStore> store;
  std::unique_ptr<TemplateRegistry> templates;
  std::unique_ptr<fake::FakeDriver> driver;
  FakeNetSlots net;
  // Admission's source of the host's figures, given to every manager
  // Restart() makes (unset: only the count and committed caps apply).
  Admission::StatsSource host_stats;
  std::unique_ptr<SandboxManager> mgr;
};

template <typename T>
T CoreTest::Run(asio::awaitable<T> a) {
  std::optional<T> out;
  Run([](asio::awaitable<T> a, std::optional<T>* out) -> asio::awaitable<void> {
    out->emplace(co_await std::move(a));
  }(std::move(a), &out));
  return std::move(*out);
}

template <typename T>
void CoreTest::Spawn(asio::awaitable<T> a, std::optional<T>* out) {
  asio::co_spawn(
      io,
      [](asio::awaitable<T> a, std::optional<T>* out) -> asio::awaitable<void> {
        out->emplace(co_await std::move(a));
      }(std::move(a), out),
      asio::detached);
}

}  // namespace hutch::testing
