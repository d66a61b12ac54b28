// The owners a create holds its resources in (core/create_steps.h): given
// back when dropped without a commit (a create whose coroutine is
// destroyed mid-way), kept once committed.
#include <gtest/gtest.h>

#include "core/create_steps.h"
#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

class CreateStepsTest : public CoreTest {
 protected:
  // Fills `steps` as a create does up to a running instance in a slot.
  void Acquire(ManagerState& st, CreateSteps& steps, const std::shared_ptr<Sandbox>& sb) {
    steps.starting = std::make_unique<StartingCount>(st.starting);
    steps.entry = std::make_unique<RegistryEntry>(st, sb);
    steps.resources = std::make_unique<SandboxResources>(st, sb);
    net::NetworkPolicy all;
    all.mode = net::NetMode::kAll;
    auto lease = Run(net.Acquire(all));
    ASSERT_TRUE(lease.ok());
    sb->rec.net_slot = lease->slot;
    InstanceSpec spec;
    spec.id = sb->rec.id;
    auto inst = Run(driver->Create(spec));
    ASSERT_TRUE(inst.ok());
    sb->instance = *inst;
    EXPECT_EQ(st.starting, 1);
    EXPECT_EQ(st.sandboxes.count(sb->rec.id), 1u);
  }
};

TEST_F(CreateStepsTest, DroppedStepsReleaseEverything) {
  ManagerState st(opts, driver.get(), templates.get(), nullptr);
  st.net = &net;
  st.ex = io.get_executor();
  auto sb = std::make_shared<Sandbox>();
  sb->rec.id = "sb_dropped";
  {
    CreateSteps steps;
    Acquire(st, steps, sb);
  }
  EXPECT_EQ(st.starting, 0);
  EXPECT_EQ(st.sandboxes.count(sb->rec.id), 0u);
  Poll();  // the instance and slot go on the executor
  EXPECT_TRUE(driver->live().empty());
  EXPECT_TRUE(net.leased().empty());
  EXPECT_EQ(sb->instance, nullptr);
  EXPECT_EQ(sb->rec.net_slot, -1);
}

TEST_F(CreateStepsTest, UnwindReleasesNewestFirstAndCommitKeeps) {
  ManagerState st(opts, driver.get(), templates.get(), nullptr);
  st.net = &net;
  st.ex = io.get_executor();
  auto a = std::make_shared<Sandbox>();
  a->rec.id = "sb_unwound";
  {
    CreateSteps steps;
    Acquire(st, steps, a);
    Run(steps.Unwind());
    EXPECT_TRUE(driver->live().empty());
    EXPECT_TRUE(net.leased().empty());
    EXPECT_EQ(st.starting, 0);
    EXPECT_EQ(st.sandboxes.count(a->rec.id), 0u);
    EXPECT_EQ(a->rec.status, SandboxStatus::kStopped);
  }
  auto b = std::make_shared<Sandbox>();
  b->rec.id = "sb_kept";
  {
    CreateSteps steps;
    Acquire(st, steps, b);
    steps.Commit();
  }
  Poll();
  EXPECT_EQ(st.starting, 0);
  EXPECT_EQ(st.sandboxes.count(b->rec.id), 1u);
  EXPECT_EQ(driver->live().count(b->rec.id), 1u);
  EXPECT_EQ(net.leased().count(b->rec.net_slot), 1u);
  Run(st.Teardown(std::move(b->instance), b->rec.net_slot));
}

TEST_F(CreateStepsTest, DeletedSandboxKeepsItsTombstone) {
  ManagerState st(opts, driver.get(), templates.get(), nullptr);
  st.net = &net;
  st.ex = io.get_executor();
  auto sb = std::make_shared<Sandbox>();
  sb->rec.id = "sb_deleted";
  {
    CreateSteps steps;
    Acquire(st, steps, sb);
    sb->deleting = true;
    sb->rec.status = SandboxStatus::kStopped;
    Run(steps.Unwind());
  }
  EXPECT_EQ(st.sandboxes.count(sb->rec.id), 1u);
  EXPECT_TRUE(driver->live().empty());
  EXPECT_TRUE(net.leased().empty());
}

}  // namespace
}  // namespace hutch::testing
