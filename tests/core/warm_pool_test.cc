// The warm pool (core/warm_pool): sandboxes started ahead of demand, that
// nobody sees until a create of the same shape claims one; a create of
// another shape starts cold and moves the pool to its shape; a broken
// template is not retried in a loop; nothing is left after a shutdown or
// a lost instance.
#include <gtest/gtest.h>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

class WarmPoolTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    AddTemplate("svc", "serve", "test -e /ready");
    opts.warm_pool = {{"svc", 1}};
    Restart();
  }
  // Ticks the reaper until the pool holds `n` (or a generous bound).
  void FillTo(size_t n) {
    for (int i = 0; i < 200 && mgr->warm_count() != n; ++i) {
      Run(mgr->reaper().Tick());
      Poll();
    }
    ASSERT_EQ(mgr->warm_count(), n);
  }
  static CreateOptions Svc(net::NetMode mode = net::NetMode::kAll) {
    CreateOptions o;
    o.template_name = "svc";
    o.network.mode = mode;
    o.owner_key = "k1";
    return o;
  }
};

TEST_F(WarmPoolTest, AWarmSandboxIsNobodysUntilACreateClaimsIt) {
  FillTo(1);
  // Started, its start command run and ready check passed, but not listed,
  // not stored, not gettable.
  ASSERT_EQ(driver->live().size(), 1u);
  const std::string warm_id = *driver->live().begin();
  EXPECT_EQ(driver->agent_behavior->proc_starts, 1);
  EXPECT_TRUE(mgr->List({}).items.empty());
  EXPECT_TRUE(StoredSandboxes().empty());
  EXPECT_EQ(mgr->Get(warm_id).error().code, Code::kSandboxNotFound);
  EXPECT_EQ(mgr->running_count(), 0u);

  CreateOptions o = Svc();
  o.metadata = {{"who", "me"}};
  o.ttl_seconds = 77;
  auto rec = MustCreate(o);
  EXPECT_EQ(rec.id, warm_id);
  EXPECT_EQ(rec.owner_key, "k1");
  EXPECT_EQ(rec.metadata.at("who"), "me");
  EXPECT_EQ(rec.status, SandboxStatus::kRunning);
  EXPECT_NEAR(std::chrono::duration<double>(rec.expires_at - rec.created_at).count(), 77, 1);
  // No second start command: the claim took what the pool had started.
  EXPECT_EQ(driver->agent_behavior->proc_starts, 1);
  EXPECT_EQ(mgr->warm_count(), 0u);
  EXPECT_EQ(StoredSandboxes().at(warm_id), "running");
  EXPECT_EQ(mgr->List({}).items.size(), 1u);

  // The pool is topped up with a new sandbox; the claimed one is never
  // handed out again.
  FillTo(1);
  EXPECT_EQ(driver->live().size(), 2u);
  auto second = MustCreate(Svc());
  EXPECT_NE(second.id, warm_id);
  ASSERT_TRUE(Run(mgr->Delete(rec.id)).ok());
  ASSERT_TRUE(Run(mgr->Delete(second.id)).ok());
}

TEST_F(WarmPoolTest, ACreateOfAnotherShapeStartsColdAndThePoolFollowsIt) {
  FillTo(1);
  const std::string warm_id = *driver->live().begin();
  // /v1's default is network none; the pool started mode all (E2B's).
  auto cold = MustCreate(Svc(net::NetMode::kNone));
  EXPECT_NE(cold.id, warm_id);
  EXPECT_EQ(driver->agent_behavior->proc_starts, 2);
  // Next ticks: the mode-all sandbox goes, one of mode none comes.
  for (int i = 0; i < 200 && (driver->live().count(warm_id) || mgr->warm_count() != 1); ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_FALSE(driver->live().count(warm_id));
  auto warm = MustCreate(Svc(net::NetMode::kNone));
  EXPECT_EQ(warm.network.mode, net::NetMode::kNone);
  EXPECT_EQ(driver->agent_behavior->proc_starts, 3);  // the refill's, not this create's
  ASSERT_TRUE(Run(mgr->Delete(cold.id)).ok());
  ASSERT_TRUE(Run(mgr->Delete(warm.id)).ok());
}

TEST_F(WarmPoolTest, ACreateWithItsOwnEnvOrResourcesStartsCold) {
  FillTo(1);
  const std::string warm_id = *driver->live().begin();
  CreateOptions with_env = Svc();
  with_env.env = {{"A", "1"}};  // the start command ran without it
  auto a = MustCreate(with_env);
  EXPECT_NE(a.id, warm_id);
  EXPECT_EQ(a.env.at("A"), "1");
  CreateOptions bigger = Svc();
  bigger.memory_mb = opts.default_memory_mb * 2;
  auto b = MustCreate(bigger);
  EXPECT_NE(b.id, warm_id);
  CreateOptions other_template;
  other_template.network.mode = net::NetMode::kAll;
  auto c = MustCreate(other_template);
  EXPECT_NE(c.id, warm_id);
  EXPECT_TRUE(driver->live().count(warm_id));
  for (const auto& id : {a.id, b.id, c.id}) ASSERT_TRUE(Run(mgr->Delete(id)).ok());
}

TEST_F(WarmPoolTest, ABrokenStartCommandIsNotRetriedInALoop) {
  driver->agent_behavior->fail_proc_start = true;
  for (int i = 0; i < 20; ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_EQ(driver->agent_behavior->proc_starts, 1);
  EXPECT_EQ(mgr->warm_count(), 0u);
  // The failed warm start gave everything back; a create still works cold.
  EXPECT_TRUE(driver->live().empty());
  EXPECT_TRUE(net.leased().empty());
  driver->agent_behavior->fail_proc_start = false;
  auto a = MustCreate(Svc());
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  ExpectNothingHeld();
}

TEST_F(WarmPoolTest, TheHostsCapsLeaveNoRoomForWarmSandboxes) {
  opts.max_sandboxes = 1;
  Restart();
  auto a = MustCreate();
  for (int i = 0; i < 10; ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_EQ(mgr->warm_count(), 0u);
  EXPECT_EQ(driver->live().size(), 1u);
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  FillTo(1);
}

TEST_F(WarmPoolTest, ALostOrShutDownWarmSandboxLeavesNothing) {
  FillTo(1);
  Inst(*driver->live().begin())->Lose("killed from outside");
  Poll();
  EXPECT_EQ(mgr->warm_count(), 0u);
  EXPECT_TRUE(driver->live().empty());
  EXPECT_TRUE(net.leased().empty());
  FillTo(1);
  Run(mgr->Shutdown());
  Poll();
  EXPECT_EQ(mgr->warm_count(), 0u);
  ExpectNothingHeld();
}

TEST_F(WarmPoolTest, ARebuiltTemplateReplacesItsWarmSandboxes) {
  FillTo(1);
  const std::string old_id = *driver->live().begin();
  AddTemplate("svc", "serve", "test -e /ready", 0, "hsvc2");  // same name, new build
  // The pool keeps only sandboxes of the build a create would get.
  for (int i = 0; i < 200 && (driver->live().count(old_id) || mgr->warm_count() != 1); ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_FALSE(driver->live().count(old_id));
  auto rec = MustCreate(Svc());
  EXPECT_EQ(rec.layers, templates->Resolve("svc")->layers);
  EXPECT_EQ(driver->agent_behavior->proc_starts, 2);  // claimed: no start of its own
  ASSERT_TRUE(Run(mgr->Delete(rec.id)).ok());
}

// code-interpreter resolves to base until it is built (creates still
// work); the pool must not keep base sandboxes for it meanwhile.
TEST_F(WarmPoolTest, ATemplateNotBuiltYetKeepsNothingWarm) {
  opts.warm_pool = {{"code-interpreter", 1}};
  Restart();
  ASSERT_EQ(templates->Resolve("code-interpreter")->name, "base");
  for (int i = 0; i < 10; ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_EQ(mgr->warm_count(), 0u);
  EXPECT_TRUE(driver->live().empty());
  CreateOptions o;
  o.template_name = "code-interpreter";
  o.network.mode = net::NetMode::kAll;
  auto a = MustCreate(o);
  EXPECT_EQ(mgr->warm_count(), 0u);
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
}

}  // namespace
}  // namespace hutch::testing
