// The sandbox state machine over the fake driver: create, pause/resume,
// delete, loss, TTL and metadata changes, network policy.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

using S = SandboxStatus;

TEST_F(CoreTest, CreateRunsAndPersists) {
  CreateOptions o;
  o.metadata["team"] = "a";
  o.env["X"] = "1";
  auto r = MustCreate(o);
  EXPECT_EQ(r.status, S::kRunning);
  EXPECT_EQ(r.driver, "fake");
  EXPECT_EQ(r.net_slot, -1);
  EXPECT_EQ(driver->live().count(r.id), 1u);
  EXPECT_EQ(StoredSandboxes()[r.id], "running");
  ASSERT_NE(driver->last_spec(), nullptr);
  EXPECT_EQ(driver->last_spec()->rootfs, dir + "/templates/base/rootfs");
  EXPECT_EQ(mgr->running_count(), 1u);
  EXPECT_EQ(mgr->committed_memory_mb(), 512);
  auto run = mgr->GetRunning(r.id);
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE((*run)->instance->agent()->alive());
}

TEST_F(CoreTest, CreateWithNetworkLeasesASlot) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto r = MustCreate(o);
  EXPECT_GE(r.net_slot, 0);
  EXPECT_EQ(net.leased().count(r.net_slot), 1u);
  EXPECT_EQ(driver->last_spec()->netns_path, "/fake/netns/" + std::to_string(r.net_slot));
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  ExpectNothingHeld();
}

TEST_F(CoreTest, PauseResumeAreIdempotentAndPersisted) {
  auto r = MustCreate();
  auto p = mgr->Pause(r.id);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->status, S::kPaused);
  EXPECT_FALSE(p->auto_paused);
  EXPECT_TRUE(Inst(r.id)->paused());
  EXPECT_EQ(StoredSandboxes()[r.id], "paused");
  EXPECT_TRUE(mgr->Pause(r.id).ok());  // again: no-op
  // An API pause is not woken by a request.
  auto g = mgr->GetRunning(r.id);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, Code::kConflict);
  auto u = mgr->Resume(r.id);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->status, S::kRunning);
  EXPECT_FALSE(Inst(r.id)->paused());
  EXPECT_EQ(StoredSandboxes()[r.id], "running");
  EXPECT_TRUE(mgr->Resume(r.id).ok());  // again: no-op
}

TEST_F(CoreTest, PauseOrResumeFailureChangesNothing) {
  auto r = MustCreate();
  Inst(r.id)->fail_pause = MakeError(Code::kInternal, "freezer broke");
  auto p = mgr->Pause(r.id);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kRunning);
  Inst(r.id)->fail_pause.reset();
  ASSERT_TRUE(mgr->Pause(r.id).ok());
  Inst(r.id)->fail_resume = MakeError(Code::kInternal, "thaw broke");
  ASSERT_FALSE(mgr->Resume(r.id).ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kPaused);
  EXPECT_EQ(StoredSandboxes()[r.id], "paused");
}

TEST_F(CoreTest, PauseThatCannotBeStoredIsUndone) {
  auto r = MustCreate();
  BreakStoreWrites("sandboxes");
  ASSERT_FALSE(mgr->Pause(r.id).ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kRunning);
  EXPECT_FALSE(Inst(r.id)->paused());
  FixStoreWrites("sandboxes");
  ASSERT_TRUE(mgr->Pause(r.id).ok());
  BreakStoreWrites("sandboxes");
  ASSERT_FALSE(mgr->Resume(r.id).ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kPaused);
  EXPECT_TRUE(Inst(r.id)->paused());
  FixStoreWrites("sandboxes");
}

TEST_F(CoreTest, PauseOfStoppedOrUnknownSandbox) {
  auto r = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  EXPECT_EQ(mgr->Pause(r.id).error().code, Code::kSandboxNotRunning);
  EXPECT_EQ(mgr->Resume(r.id).error().code, Code::kSandboxNotRunning);
  EXPECT_EQ(mgr->Pause("sb_nope").error().code, Code::kSandboxNotFound);
}

TEST_F(CoreTest, DeleteStopsAndKeepsATombstone) {
  auto r = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  auto g = mgr->Get(r.id);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->status, S::kStopped);
  EXPECT_EQ(g->reason, "deleted");
  EXPECT_EQ(StoredSandboxes()[r.id], "stopped");
  EXPECT_EQ(driver->destroyed, 1);
  EXPECT_TRUE(Run(mgr->Delete(r.id)).ok());  // a second delete: 204
  EXPECT_EQ(driver->destroyed, 1);
  EXPECT_EQ(Run(mgr->Delete("sb_never")).error().code, Code::kSandboxNotFound);
  EXPECT_EQ(mgr->GetRunning(r.id).error().code, Code::kSandboxNotRunning);
  ExpectNothingHeld();
}

TEST_F(CoreTest, DeletePausedSandbox) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto r = MustCreate(o);
  ASSERT_TRUE(mgr->Pause(r.id).ok());
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kStopped);
  ExpectNothingHeld();
}

TEST_F(CoreTest, LostInstanceFailsAndIsTornDown) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto r = MustCreate(o);
  Inst(r.id)->Lose("agent exited with status 9");
  Poll();
  auto g = mgr->Get(r.id);
  EXPECT_EQ(g->status, S::kFailed);
  EXPECT_EQ(g->reason, "agent exited with status 9");
  EXPECT_EQ(StoredSandboxes()[r.id], "failed");
  EXPECT_EQ(mgr->GetRunning(r.id).error().code, Code::kSandboxNotRunning);
  ExpectNothingHeld();
  // Failed stays failed: a delete keeps its record, stopped.
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  EXPECT_EQ(mgr->Get(r.id)->status, S::kStopped);
}

TEST_F(CoreTest, AgentConnectionLossFailsTheSandbox) {
  auto r = MustCreate();
  ASSERT_TRUE(mgr->Pause(r.id).ok());
  // The agent's socket breaks: the driver reports the loss through on_lost.
  Inst(r.id)->fake_agent()->Kill();
  Poll();
  EXPECT_EQ(mgr->Get(r.id)->status, S::kFailed);
  ExpectNothingHeld();
}

TEST_F(CoreTest, LossAfterDeleteIsIgnored) {
  auto r = MustCreate();
  auto inst = Inst(r.id);
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  inst->Lose("late");
  Poll();
  EXPECT_EQ(mgr->Get(r.id)->status, S::kStopped);
}

TEST_F(CoreTest, SetTtlRenewsRunningAndPausedOnly) {
  auto r = MustCreate();
  EXPECT_EQ(mgr->SetTtl(r.id, 0).error().code, Code::kInvalidRequest);
  EXPECT_EQ(mgr->SetTtl(r.id, opts.max_ttl_seconds + 1).error().code, Code::kInvalidRequest);
  auto t = mgr->SetTtl(r.id, 3600);
  ASSERT_TRUE(t.ok());
  EXPECT_GT(t->expires_at, r.expires_at);
  ASSERT_TRUE(mgr->Pause(r.id).ok());
  EXPECT_TRUE(mgr->SetTtl(r.id, 60).ok());
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  EXPECT_EQ(mgr->SetTtl(r.id, 60).error().code, Code::kSandboxNotRunning);
}

TEST_F(CoreTest, PatchMetadataMergesAndRemoves) {
  CreateOptions o;
  o.metadata = {{"a", "1"}, {"b", "2"}};
  auto r = MustCreate(o);
  auto p = mgr->PatchMetadata(r.id, {{"a", std::nullopt}, {"c", "3"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->metadata, (std::map<std::string, std::string>{{"b", "2"}, {"c", "3"}}));
  BreakStoreWrites("sandboxes");
  EXPECT_FALSE(mgr->PatchMetadata(r.id, {{"d", "4"}}).ok());
  EXPECT_EQ(mgr->Get(r.id)->metadata.count("d"), 0u);
  FixStoreWrites("sandboxes");
  ASSERT_TRUE(Run(mgr->Delete(r.id)).ok());
  EXPECT_EQ(mgr->PatchMetadata(r.id, {{"d", "4"}}).error().code, Code::kSandboxNotFound);
}

TEST_F(CoreTest, ListFiltersAndPages) {
  CreateOptions a;
  a.metadata["k"] = "x";
  auto r1 = MustCreate(a);
  auto r2 = MustCreate(a);
  auto r3 = MustCreate();
  ASSERT_TRUE(mgr->Pause(r3.id).ok());
  ListFilter f;
  f.metadata["k"] = "x";
  EXPECT_EQ(mgr->List(f).items.size(), 2u);
  ListFilter paused;
  paused.status = S::kPaused;
  ASSERT_EQ(mgr->List(paused).items.size(), 1u);
  EXPECT_EQ(mgr->List(paused).items[0].id, r3.id);
  ListFilter page;
  page.limit = 2;
  auto p1 = mgr->List(page);
  ASSERT_EQ(p1.items.size(), 2u);
  ASSERT_FALSE(p1.next_cursor.empty());
  page.cursor = p1.next_cursor;
  auto p2 = mgr->List(page);
  EXPECT_EQ(p2.items.size(), 1u);
  EXPECT_TRUE(p2.next_cursor.empty());
  // The template a sandbox was made from, and a creation time from on.
  ListFilter base;
  base.template_name = "base";
  EXPECT_EQ(mgr->List(base).items.size(), 3u);
  base.template_name = "no-such-template";
  EXPECT_TRUE(mgr->List(base).items.empty());
  ListFilter since;
  since.created_after = r2.created_at;
  std::vector<std::string> ids;
  for (const auto& r : mgr->List(since).items) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want = {r2.id, r3.id};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);
  (void)r1;
}

TEST_F(CoreTest, NetworkPolicyChangesNeedASlot) {
  auto plain = MustCreate();
  net::NetworkPolicy all;
  all.mode = net::NetMode::kAll;
  EXPECT_EQ(Run(mgr->SetNetworkPolicy(plain.id, all)).error().code, Code::kNotSupported);
  EXPECT_TRUE(Run(mgr->SetNetworkPolicy(plain.id, net::NetworkPolicy{})).ok());
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto r = MustCreate(o);
  net::NetworkPolicy pol;
  pol.mode = net::NetMode::kPolicy;
  auto s = Run(mgr->SetNetworkPolicy(r.id, pol));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->network.mode, net::NetMode::kPolicy);
  EXPECT_EQ(net.policy[r.net_slot], net::NetMode::kPolicy);
  net.fail_set_policy = MakeError(Code::kInternal, "nft failed");
  EXPECT_FALSE(Run(mgr->SetNetworkPolicy(r.id, all)).ok());
  EXPECT_EQ(mgr->Get(r.id)->network.mode, net::NetMode::kPolicy);
}

TEST_F(CoreTest, ShutdownDestroysEverything) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  MustCreate(o);
  auto p = MustCreate();
  ASSERT_TRUE(mgr->Pause(p.id).ok());
  Run(mgr->Shutdown());
  ExpectNothingHeld();
  auto r = Create();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kUnavailable);
}

TEST_F(CoreTest, StartCommandAndReadyCheckRunThroughTheAgent) {
  AddTemplate("svc", "sleep infinity", "true");
  CreateOptions o;
  o.template_name = "svc";
  auto r = MustCreate(o);
  EXPECT_EQ(r.status, S::kRunning);
  EXPECT_EQ(driver->agent_behavior->proc_starts, 1);
  EXPECT_EQ(driver->agent_behavior->execs, 1);
  EXPECT_EQ(driver->last_spec()->layers, std::vector<std::string>{dir + "/builds/hsvc/layer"});
}

TEST_F(CoreTest, VolumesNeedAVolumeManager) {
  CreateOptions o;
  o.volumes.push_back({"data", "/data", false});
  auto r = Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kNotSupported);
  EXPECT_TRUE(mgr->VolumeUsers("data").empty());
}

}  // namespace
}  // namespace hutch::testing
