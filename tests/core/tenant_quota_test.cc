// Tenant quotas in core (issue 32 #12): live sandboxes are counted with the
// ones still starting and snapshots with the ones still copying, so
// concurrent creates of one tenant cannot all pass; a failed create gives
// its place back; a fork's children count; what a restarted manager counts
// comes from the store. Admin creates (no scope, not tenant) are exempt,
// and owners are counted apart.
#include <gtest/gtest.h>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

class TenantQuotaTest : public CoreTest {
 protected:
  void SetUp() override {
    opts.quotas.max_sandboxes = 2;
    opts.quotas.max_snapshots = 1;
    CoreTest::SetUp();
  }
  static CreateOptions Tenant(const std::string& owner) {
    CreateOptions o;
    o.owner_key = owner;
    o.scope = owner;
    return o;
  }
};

TEST_F(TenantQuotaTest, StartingSandboxesCount) {
  driver->hold_creates = true;
  std::optional<Result<SandboxRecord>> a, b;
  Spawn(mgr->Create(Tenant("t:a")), &a);
  Spawn(mgr->Create(Tenant("t:a")), &b);
  Poll();
  EXPECT_EQ(driver->starting, 2);
  // Both still starting: the third is over the quota of 2, refused at
  // once (were it let through, it would be starting too).
  std::optional<Result<SandboxRecord>> third;
  Spawn(mgr->Create(Tenant("t:a")), &third);
  Poll();
  EXPECT_TRUE(third.has_value()) << "a third create is starting";
  EXPECT_EQ(driver->starting, 2);
  driver->hold_creates = false;
  while (!a || !b || !third) Poll();
  ASSERT_TRUE(a->ok());
  ASSERT_TRUE(b->ok());
  ASSERT_FALSE(third->ok());
  EXPECT_EQ(third->error().code, Code::kQuotaExceeded);
  EXPECT_NE(third->error().message.find("--tenant-max-sandboxes"), std::string::npos)
      << third->error().message;
  // Another tenant passes, and so does an admin create (no scope, not
  // tenant) even under the full owner id: the check is skipped for admins.
  EXPECT_TRUE(Create(Tenant("t:b")).ok());
  CreateOptions admin;
  admin.owner_key = "t:a";
  auto by_admin = Create(admin);
  ASSERT_TRUE(by_admin.ok());
  ASSERT_TRUE(Run(mgr->Delete(by_admin->id)).ok());
  // A fork's children count, as a tenant's.
  auto fork = Run(mgr->Fork((*a)->id, 1, "t:a", true));
  ASSERT_FALSE(fork.ok());
  EXPECT_EQ(fork.error().code, Code::kQuotaExceeded);
  // Deleting one frees room.
  ASSERT_TRUE(Run(mgr->Delete((*a)->id)).ok());
  EXPECT_TRUE(Create(Tenant("t:a")).ok());
}

TEST_F(TenantQuotaTest, SnapshotsCountPerOwner) {
  auto sb = MustCreate(Tenant("t:a"));
  auto first = Run(mgr->Snapshot(sb.id, true));
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto second = Run(mgr->Snapshot(sb.id, true));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, Code::kQuotaExceeded);
  // The admin is exempt.
  EXPECT_TRUE(Run(mgr->Snapshot(sb.id, false)).ok());
  ASSERT_TRUE(mgr->DeleteSnapshot(first->id).ok());
  // Still one of the owner's kept (the admin's, taken of its sandbox).
  EXPECT_FALSE(Run(mgr->Snapshot(sb.id, true)).ok());
}

TEST_F(TenantQuotaTest, SnapshotsStillCopyingCount) {
  auto sb = MustCreate(Tenant("t:a"));
  Inst(sb.id)->hold_capture = true;
  std::optional<Result<SnapshotRecord>> first;
  Spawn(mgr->Snapshot(sb.id, true), &first);
  Poll();
  ASSERT_FALSE(first.has_value());  // still copying
  // Refused at once (were it let through, it would be copying too).
  std::optional<Result<SnapshotRecord>> second;
  Spawn(mgr->Snapshot(sb.id, true), &second);
  Poll();
  EXPECT_TRUE(second.has_value()) << "a second snapshot is copying";
  Inst(sb.id)->hold_capture = false;
  while (!first || !second) Poll();
  EXPECT_TRUE(first->ok());
  ASSERT_FALSE(second->ok());
  EXPECT_EQ(second->error().code, Code::kQuotaExceeded);
  EXPECT_NE(second->error().message.find("--tenant-max-snapshots"), std::string::npos)
      << second->error().message;
}

TEST_F(TenantQuotaTest, FailedCreatesGiveTheirPlaceBack) {
  driver->fail_create = MakeError(Code::kInternal, "no room in the kernel");
  EXPECT_FALSE(Create(Tenant("t:a")).ok());
  auto sb = MustCreate(Tenant("t:a"));
  Inst(sb.id)->fail_capture = MakeError(Code::kInternal, "copy failed");
  EXPECT_EQ(Run(mgr->Snapshot(sb.id, true)).error().code, Code::kInternal);
  Inst(sb.id)->fail_capture.reset();
  // Neither the failed create nor the failed snapshot is counted.
  EXPECT_TRUE(Create(Tenant("t:a")).ok());
  EXPECT_TRUE(Run(mgr->Snapshot(sb.id, true)).ok());
}

TEST_F(TenantQuotaTest, ARestartedManagerCountsWhatTheStoreHolds) {
  auto sb = MustCreate(Tenant("t:a"));
  MustCreate(Tenant("t:a"));
  ASSERT_TRUE(Run(mgr->Snapshot(sb.id, true)).ok());
  Restart();
  auto third = Create(Tenant("t:a"));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, Code::kQuotaExceeded);
  auto snap = Run(mgr->Snapshot(sb.id, true));
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.error().code, Code::kQuotaExceeded);
  EXPECT_TRUE(Create(Tenant("t:b")).ok());
}

}  // namespace
}  // namespace hutch::testing
