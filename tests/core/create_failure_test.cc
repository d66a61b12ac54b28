// A create that fails at any step leaves nothing behind: no instance, no
// network slot, no store row, no agent socket, no registry entry, and the
// caps count it no more (a later create up to max_sandboxes succeeds).
#include <gtest/gtest.h>

#include <functional>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

using S = SandboxStatus;

class CreateFailureTest : public CoreTest {
 protected:
  void SetUp() override {
    // Tombstones are forgotten at the next reaper pass: each check below
    // starts from an empty registry.
    opts.tombstone_ttl = std::chrono::seconds(0);
    opts.max_sandboxes = 2;
    opts.max_memory_committed_mb = 1024;
    CoreTest::SetUp();
  }
  // The create failed with `code`, held nothing, and the caps are whole.
  void ExpectCleanFailure(const Result<SandboxRecord>& r, Code code) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, code) << r.error().message;
    ExpectNothingHeld();
    EXPECT_TRUE(mgr->List({}).items.empty());
    EXPECT_TRUE(StoredSandboxes().empty());
    EXPECT_EQ(CountEntries(dir + "/snapshots"), 0u);
    // Nothing still counts against max_sandboxes or committed memory.
    CreateOptions o;
    o.network.mode = net::NetMode::kAll;
    auto a = MustCreate(o);
    auto b = MustCreate(o);
    ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
    ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
    ExpectNothingHeld();
    Run(mgr->reaper().Tick());
    EXPECT_TRUE(mgr->List({}).items.empty());
  }
  CreateOptions Networked() {
    CreateOptions o;
    o.network.mode = net::NetMode::kAll;
    return o;
  }
};

// Steps that only check: each refuses before anything is acquired.
TEST_F(CreateFailureTest, Validation) {
  struct Case {
    const char* what;
    std::function<void(CreateOptions&)> edit;
    Code code;
  };
  const std::vector<Case> cases = {
      {"ttl zero", [](CreateOptions& o) { o.ttl_seconds = 0; }, Code::kInvalidRequest},
      {"ttl over max", [&](CreateOptions& o) { o.ttl_seconds = opts.max_ttl_seconds + 1; },
       Code::kInvalidRequest},
      {"cpu", [](CreateOptions& o) { o.cpu = 0; }, Code::kInvalidRequest},
      {"memory", [](CreateOptions& o) { o.memory_mb = 8; }, Code::kInvalidRequest},
      {"disk", [](CreateOptions& o) { o.disk_mb = 1 << 30; }, Code::kInvalidRequest},
      {"snapshot", [](CreateOptions& o) { o.snapshot = "snap_missing"; }, Code::kSnapshotNotFound},
      {"driver unknown", [](CreateOptions& o) { o.driver = "nope"; }, Code::kInvalidRequest},
      {"driver unavailable", [](CreateOptions& o) { o.driver = "vm"; }, Code::kNotSupported},
      {"template", [](CreateOptions& o) { o.template_name = "missing"; }, Code::kTemplateNotFound},
      {"volume path",
       [](CreateOptions& o) {
         o.volumes.push_back({"data", "relative", false});
       },
       Code::kInvalidRequest},
      {"no volumes",
       [](CreateOptions& o) {
         o.volumes.push_back({"data", "/data", false});
       },
       Code::kNotSupported},
      {"auto pause", [](CreateOptions& o) { o.auto_pause_seconds = -1; }, Code::kInvalidRequest},
      {"memory cap", [](CreateOptions& o) { o.memory_mb = 2048; }, Code::kCapacityExhausted},
  };
  mgr->SetDriverUnavailable("vm", "no kvm");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    CreateOptions o;
    c.edit(o);
    const int before = driver->creates;
    auto r = Create(o);
    EXPECT_EQ(driver->creates, before);  // refused before the driver
    ExpectCleanFailure(r, c.code);
  }
}

TEST_F(CreateFailureTest, NetworkUnavailable) {
  mgr->SetNetSlots(nullptr);
  auto r = Create(Networked());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kNotSupported);
  mgr->SetNetSlots(&net);
  ExpectCleanFailure(r, Code::kNotSupported);
}

TEST_F(CreateFailureTest, CapacityCountsRunningPausedAndStarting) {
  auto a = MustCreate();
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  driver->hold_creates = true;
  std::optional<Result<SandboxRecord>> second;
  Spawn(mgr->Create({}), &second);
  Poll();
  EXPECT_EQ(driver->starting, 1);
  // One paused + one starting = the cap of 2.
  auto third = Create();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, Code::kCapacityExhausted);
  driver->hold_creates = false;
  while (!second) Poll();
  ASSERT_TRUE(second->ok());
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  ASSERT_TRUE(Run(mgr->Delete((*second)->id)).ok());
  ExpectNothingHeld();
}

TEST_F(CreateFailureTest, CommittedMemoryCap) {
  CreateOptions big;
  big.memory_mb = 768;
  auto a = MustCreate(big);
  auto r = Create(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kCapacityExhausted);
  EXPECT_NE(r.error().message.find("768 of 1024 MB committed"), std::string::npos)
      << r.error().message;
  CreateOptions small;
  small.memory_mb = 256;
  auto b = MustCreate(small);
  EXPECT_EQ(mgr->committed_memory_mb(), 1024);
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  EXPECT_EQ(mgr->committed_memory_mb(), 256);
  ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
}

// Step: the network slot.
TEST_F(CreateFailureTest, NetworkLease) {
  net.fail_acquire = MakeError(Code::kInternal, "no free slot");
  ExpectCleanFailure(Create(Networked()), Code::kInternal);
  EXPECT_EQ(driver->creates, 2);  // ExpectCleanFailure's
}

// Step: the driver's instance (the slot it would run in is freed).
TEST_F(CreateFailureTest, DriverCreate) {
  driver->fail_create = MakeError(Code::kInternal, "clone failed");
  auto r = Create(Networked());
  EXPECT_EQ(net.releases, 1);
  ExpectCleanFailure(r, Code::kInternal);
}

// Step: deleted while the driver was creating: the tombstone stays, the
// instance and slot go, the create answers sandbox_not_running.
TEST_F(CreateFailureTest, DeletedWhileStarting) {
  driver->hold_creates = true;
  std::optional<Result<SandboxRecord>> r;
  Spawn(mgr->Create(Networked()), &r);
  Poll();
  auto list = mgr->List({});
  ASSERT_EQ(list.items.size(), 1u);
  const std::string id = list.items[0].id;
  EXPECT_EQ(list.items[0].status, S::kStarting);
  EXPECT_EQ(mgr->committed_memory_mb(), 512);
  ASSERT_TRUE(Run(mgr->Delete(id)).ok());
  driver->hold_creates = false;
  while (!r) Poll();
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code, Code::kSandboxNotRunning);
  EXPECT_EQ(mgr->Get(id)->status, S::kStopped);
  EXPECT_EQ(driver->created, 1);
  EXPECT_EQ(driver->destroyed, 1);
  ExpectNothingHeld();
}

// Step: the template's start command.
TEST_F(CreateFailureTest, StartCommand) {
  AddTemplate("svc", "serve", "");
  driver->agent_behavior->fail_proc_start = true;
  CreateOptions o = Networked();
  o.template_name = "svc";
  auto r = Create(o);
  driver->agent_behavior->fail_proc_start = false;
  EXPECT_EQ(driver->created, 1);
  EXPECT_EQ(driver->destroyed, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("start command"), std::string::npos) << r.error().message;
  ExpectCleanFailure(r, r.error().code);
}

// Step: the template's ready check.
TEST_F(CreateFailureTest, ReadyCheck) {
  AddTemplate("svc", "", "test -e /ready");
  driver->agent_behavior->exec_exit_code = 1;
  CreateOptions o = Networked();
  o.template_name = "svc";
  auto r = Create(o);
  driver->agent_behavior->exec_exit_code = 0;
  EXPECT_GE(driver->agent_behavior->execs, 1);
  ExpectCleanFailure(r, Code::kUnavailable);
}

// Deleted while its ready check is still polled (status running, not yet
// answered): the create answers sandbox_not_running, the tombstone stays.
TEST_F(CreateFailureTest, DeletedDuringReadyCheck) {
  AddTemplate("svc", "", "test -e /ready", 5);
  driver->agent_behavior->exec_exit_code = 1;
  CreateOptions o = Networked();
  o.template_name = "svc";
  std::optional<Result<SandboxRecord>> r;
  Spawn(mgr->Create(o), &r);
  Sleep(std::chrono::milliseconds(150));
  ASSERT_FALSE(r.has_value());
  auto list = mgr->List({});
  ASSERT_EQ(list.items.size(), 1u);
  const std::string id = list.items[0].id;
  ASSERT_TRUE(Run(mgr->Delete(id)).ok());
  while (!r) Poll();
  driver->agent_behavior->exec_exit_code = 0;
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code, Code::kSandboxNotRunning) << r->error().message;
  EXPECT_EQ(mgr->Get(id)->status, S::kStopped);
  EXPECT_EQ(StoredSandboxes()[id], "stopped");
  ExpectNothingHeld();
}

// Step: the durable record.
TEST_F(CreateFailureTest, Persist) {
  BreakStoreWrites("sandboxes");
  auto r = Create(Networked());
  FixStoreWrites("sandboxes");
  EXPECT_EQ(driver->created, 1);
  EXPECT_EQ(driver->destroyed, 1);
  ASSERT_FALSE(r.ok());
  ExpectCleanFailure(r, r.error().code);
}

// The agent hangs up while the start command starts: the create fails,
// nothing is left (the instance's loss is not yet watched: the create
// itself gives it back).
TEST_F(CreateFailureTest, AgentGoneDuringStartCommand) {
  AddTemplate("svc", "serve", "");
  driver->agent_behavior->hang_up_on_proc_start = true;
  CreateOptions o = Networked();
  o.template_name = "svc";
  auto r = Create(o);
  driver->agent_behavior->hang_up_on_proc_start = false;
  EXPECT_EQ(driver->destroyed, 1);
  ASSERT_FALSE(r.ok());
  ExpectCleanFailure(r, r.error().code);
}

// The idempotency key of a failed create is given back: a retry creates.
TEST_F(CreateFailureTest, IdempotentCreateFailureReleasesTheKey) {
  driver->fail_create = MakeError(Code::kInternal, "clone failed");
  bool replayed = true;
  auto r = Run(mgr->CreateIdempotent({}, "k1", "{}", &replayed));
  ASSERT_FALSE(r.ok());
  auto again = Run(mgr->CreateIdempotent({}, "k1", "{}", &replayed));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(replayed);
}

}  // namespace
}  // namespace hutch::testing
