// A restarted hutchd (a second manager over the same store, driver and
// network): adoption, loss while down, expiry while down, unanswered
// creates, and reconcile of what no record claims.
#include <gtest/gtest.h>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

using S = SandboxStatus;

TEST_F(CoreTest, RestartAdoptsRunningAndPausedSandboxes) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto run = MustCreate(o);
  auto paused = MustCreate();
  ASSERT_TRUE(mgr->Pause(paused.id).ok());
  auto gone = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(gone.id)).ok());
  auto rep = Restart();
  EXPECT_EQ(rep.adopted, 2);
  EXPECT_EQ(rep.lost, 0);
  EXPECT_EQ(rep.removed, 0);
  EXPECT_EQ(driver->adopted, 2);
  EXPECT_EQ(mgr->Get(run.id)->status, S::kRunning);
  EXPECT_EQ(mgr->Get(paused.id)->status, S::kPaused);
  EXPECT_TRUE(Inst(paused.id)->paused());  // adopted without waking it
  EXPECT_EQ(mgr->Get(gone.id)->status, S::kStopped);
  EXPECT_EQ(net.leased().count(run.net_slot), 1u);
  // The adopted ones work like any other.
  auto g = mgr->GetRunning(run.id);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE((*g)->instance->agent()->alive());
  ASSERT_TRUE(mgr->Resume(paused.id).ok());
  Inst(run.id)->Lose("agent exited");
  Poll();
  EXPECT_EQ(mgr->Get(run.id)->status, S::kFailed);
  EXPECT_TRUE(net.leased().empty());
}

TEST_F(CoreTest, RestartMarksUnadoptableSandboxesFailed) {
  auto a = MustCreate();
  driver->fail_adopt = MakeError(Code::kUnavailable, "agent does not answer");
  auto rep = Restart();
  EXPECT_EQ(rep.lost, 1);
  EXPECT_EQ(rep.removed, 1);  // reconcile removed what was left of it
  auto g = mgr->Get(a.id);
  EXPECT_EQ(g->status, S::kFailed);
  EXPECT_NE(g->reason.find("lost while hutchd was down"), std::string::npos);
  EXPECT_EQ(StoredSandboxes()[a.id], "failed");
  ExpectNothingHeld();
}

TEST_F(CoreTest, RestartWithoutTheSlotLosesTheSandbox) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto a = MustCreate(o);
  net.fail_adopt = MakeError(Code::kInternal, "veth gone");
  auto rep = Restart();
  EXPECT_EQ(rep.lost, 1);
  EXPECT_EQ(mgr->Get(a.id)->status, S::kFailed);
  ExpectNothingHeld();
}

TEST_F(CoreTest, RestartExpiresSandboxesPastTheirTtl) {
  CreateOptions o;
  o.ttl_seconds = 1;
  auto a = MustCreate(o);
  Sleep(std::chrono::milliseconds(1100));
  auto rep = Restart();
  EXPECT_EQ(rep.expired, 1);
  EXPECT_EQ(rep.removed, 1);
  auto g = mgr->Get(a.id);
  EXPECT_EQ(g->status, S::kStopped);
  EXPECT_EQ(g->reason, "expired");
  ExpectNothingHeld();
}

TEST_F(CoreTest, RestartForgetsUnansweredCreatesAndReconcilesOrphans) {
  // A row left by a create cut mid-way (status starting) and an instance
  // no row claims.
  SandboxRecord r;
  r.id = "sb_cut";
  r.status = S::kStarting;
  store::SandboxRow row;
  row.id = r.id;
  row.status = "starting";
  row.record = r.ToStoreJson();
  ASSERT_TRUE(store->PutSandbox(row).ok());
  InstanceSpec spec;
  spec.id = "sb_orphan";
  ASSERT_TRUE(Run(driver->Create(spec)).ok());
  store::SandboxRow junk;
  junk.id = "sb_junk";
  junk.status = "running";
  junk.record = "not json";
  ASSERT_TRUE(store->PutSandbox(junk).ok());
  auto rep = Restart();
  EXPECT_EQ(rep.forgotten, 1);
  EXPECT_EQ(rep.removed, 1);
  EXPECT_FALSE(mgr->Get("sb_cut").ok());
  EXPECT_FALSE(mgr->Get("sb_junk").ok());
  EXPECT_TRUE(StoredSandboxes().empty());
  ExpectNothingHeld();
}

TEST_F(CoreTest, RestartReconcilesUnclaimedNetworkSlots) {
  bool ok = false;
  Run([](FakeNetSlots* n, bool* ok) -> asio::awaitable<void> {
    *ok = (co_await n->Acquire(net::NetworkPolicy{})).ok();
  }(&net, &ok));
  ASSERT_TRUE(ok);
  auto rep = Restart();
  EXPECT_EQ(rep.removed, 1);
  EXPECT_TRUE(net.leased().empty());
}

}  // namespace
}  // namespace hutch::testing
