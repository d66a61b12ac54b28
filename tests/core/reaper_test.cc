// The reaper: TTL expiry (a pause instead for pause_on_expiry), forgetting tombstones, idle
// auto-pause (and the wake-up on the next request), and template removal with its build dir kept
// while a sandbox stands on it.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

namespace fs = std::filesystem;
using S = SandboxStatus;

TEST_F(CoreTest, ReaperDeletesExpiredSandboxes) {
  CreateOptions shortlived;
  shortlived.ttl_seconds = 1;
  shortlived.network.mode = net::NetMode::kAll;
  auto a = MustCreate(shortlived);
  auto paused = MustCreate(shortlived);
  ASSERT_TRUE(mgr->Pause(paused.id).ok());
  auto b = MustCreate();
  Run(mgr->reaper().Tick());
  EXPECT_EQ(mgr->Get(a.id)->status, S::kRunning);
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  for (const auto& id : {a.id, paused.id}) {
    auto g = mgr->Get(id);
    EXPECT_EQ(g->status, S::kStopped);
    EXPECT_EQ(g->reason, "expired");
  }
  EXPECT_EQ(mgr->Get(b.id)->status, S::kRunning);
  EXPECT_EQ(driver->live(), std::set<std::string>{b.id});
  EXPECT_TRUE(net.leased().empty());
}

TEST_F(CoreTest, PauseOnExpiryPausesAndKeepsTheSandbox) {
  CreateOptions o;
  o.ttl_seconds = 1;
  o.pause_on_expiry = true;
  auto a = MustCreate(o);
  auto plain = MustCreate(CreateOptions{.ttl_seconds = 1});
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  // Paused by the reaper, not deleted, and kept for the largest TTL; a
  // request does not wake it (an API pause, not the idle policy's).
  auto g = mgr->Get(a.id);
  EXPECT_EQ(g->status, S::kPaused);
  EXPECT_FALSE(g->auto_paused);
  EXPECT_TRUE(Inst(a.id)->paused());
  const auto left = g->expires_at - std::chrono::system_clock::now();
  EXPECT_GT(left, std::chrono::seconds(opts.max_ttl_seconds - 60));
  EXPECT_EQ(mgr->Get(plain.id)->status, S::kStopped);
  // The flag and the pause survive a restart.
  EXPECT_EQ(StoredSandboxes()[a.id], "paused");
  Restart();
  EXPECT_TRUE(mgr->Get(a.id)->pause_on_expiry);
  // Resumed, it runs again; at its next TTL it is paused again.
  ASSERT_TRUE(mgr->Resume(a.id).ok());
  ASSERT_TRUE(mgr->SetTtl(a.id, 1).ok());
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  EXPECT_EQ(mgr->Get(a.id)->status, S::kPaused);
}

TEST_F(CoreTest, ReaperLoopRunsOnItsOwn) {
  CreateOptions shortlived;
  shortlived.ttl_seconds = 1;
  auto a = MustCreate(shortlived);
  mgr->StartReaper(io.get_executor());
  Sleep(std::chrono::milliseconds(1400));
  EXPECT_EQ(mgr->Get(a.id)->status, S::kStopped);
  ExpectNothingHeld();
}

TEST_F(CoreTest, ReaperForgetsTombstonesPastTheirTtl) {
  opts.tombstone_ttl = std::chrono::seconds(0);
  Restart();
  auto a = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  EXPECT_TRUE(mgr->Get(a.id).ok());
  Run(mgr->reaper().Tick());
  EXPECT_EQ(mgr->Get(a.id).error().code, Code::kSandboxNotFound);
  EXPECT_TRUE(StoredSandboxes().empty());
}

TEST_F(CoreTest, IdleSandboxesArePausedAndWokenByARequest) {
  CreateOptions o;
  o.auto_pause_seconds = 1;
  auto a = MustCreate(o);
  auto busy = MustCreate(o);
  auto never = MustCreate();
  Run(mgr->reaper().Tick());
  EXPECT_EQ(mgr->Get(a.id)->status, S::kRunning);
  // An open stream is use, however old its request.
  auto stream = Inst(busy.id)->agent()->OpenStream();
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  auto g = mgr->Get(a.id);
  EXPECT_EQ(g->status, S::kPaused);
  EXPECT_TRUE(g->auto_paused);
  EXPECT_TRUE(Inst(a.id)->paused());
  EXPECT_EQ(StoredSandboxes()[a.id], "paused");
  EXPECT_EQ(mgr->Get(busy.id)->status, S::kRunning);
  EXPECT_EQ(mgr->Get(never.id)->status, S::kRunning);
  // A request that needs it running resumes it.
  auto run = mgr->GetRunning(a.id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(mgr->Get(a.id)->status, S::kRunning);
  EXPECT_FALSE(mgr->Get(a.id)->auto_paused);
  EXPECT_FALSE(Inst(a.id)->paused());
  stream.reset();
}

TEST_F(CoreTest, ApiPauseOfAnIdlePausedSandboxSticks) {
  CreateOptions o;
  o.auto_pause_seconds = 1;
  auto a = MustCreate(o);
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  ASSERT_TRUE(mgr->Get(a.id)->auto_paused);
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  EXPECT_FALSE(mgr->Get(a.id)->auto_paused);
  EXPECT_EQ(mgr->GetRunning(a.id).error().code, Code::kConflict);
}

TEST_F(CoreTest, IdleWakeFailureIsReported) {
  CreateOptions o;
  o.auto_pause_seconds = 1;
  auto a = MustCreate(o);
  Sleep(std::chrono::milliseconds(1100));
  Run(mgr->reaper().Tick());
  Inst(a.id)->fail_resume = MakeError(Code::kInternal, "thaw broke");
  EXPECT_FALSE(mgr->GetRunning(a.id).ok());
  EXPECT_EQ(mgr->Get(a.id)->status, S::kPaused);
}

TEST_F(CoreTest, DeleteTemplateKeepsItsBuildWhileUsed) {
  AddTemplate("svc");
  AddTemplate("old");
  CreateOptions o;
  o.template_name = "svc";
  auto a = MustCreate(o);
  EXPECT_EQ(mgr->DeleteTemplate("base").error().code, Code::kConflict);
  ASSERT_TRUE(mgr->DeleteTemplate("svc").ok());
  EXPECT_TRUE(fs::exists(dir + "/builds/hsvc/layer"));  // a stands on it
  EXPECT_EQ(Create(o).error().code, Code::kTemplateNotFound);
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  ASSERT_TRUE(mgr->DeleteTemplate("old").ok());  // collects both now
  EXPECT_FALSE(fs::exists(dir + "/builds/hsvc"));
  EXPECT_FALSE(fs::exists(dir + "/builds/hold"));
  EXPECT_EQ(mgr->DeleteTemplate("old").error().code, Code::kTemplateNotFound);
}

TEST_F(CoreTest, DeleteTemplateKeepsItsBuildWhileASnapshotUsesIt) {
  AddTemplate("svc");
  CreateOptions o;
  o.template_name = "svc";
  auto a = MustCreate(o);
  auto s = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  ASSERT_TRUE(mgr->DeleteTemplate("svc").ok());
  EXPECT_TRUE(fs::exists(dir + "/builds/hsvc/layer"));  // the snapshot's stack has it
  ASSERT_TRUE(mgr->DeleteSnapshot(s->id).ok());
  AddTemplate("other");
  ASSERT_TRUE(mgr->DeleteTemplate("other").ok());
  EXPECT_FALSE(fs::exists(dir + "/builds/hsvc"));
}

}  // namespace
}  // namespace hutch::testing
