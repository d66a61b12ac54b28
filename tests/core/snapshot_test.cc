// Snapshots and forks: records, layer stacks, and the files of deleted
// snapshots kept while a sandbox or another snapshot stands on them.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

namespace fs = std::filesystem;
using S = SandboxStatus;

TEST_F(CoreTest, SnapshotRecordsTheLayer) {
  auto a = MustCreate();
  auto s = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->sandbox_id, a.id);
  EXPECT_EQ(s->template_name, "base");
  ASSERT_EQ(s->layers.size(), 1u);
  EXPECT_EQ(s->layers[0], opts.snapshots_dir + "/" + s->id + "/layer");
  EXPECT_TRUE(fs::exists(s->layers[0] + "/fake-layer"));
  EXPECT_EQ(s->size_bytes, a.id.size());
  EXPECT_EQ(s->rootfs, dir + "/templates/base/rootfs");
  ASSERT_EQ(mgr->ListSnapshots().size(), 1u);
  EXPECT_TRUE(mgr->GetSnapshot(s->id).ok());
  // A paused sandbox can be snapshotted too; a stopped one cannot.
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  EXPECT_TRUE(Run(mgr->Snapshot(a.id)).ok());
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  EXPECT_EQ(Run(mgr->Snapshot(a.id)).error().code, Code::kSandboxNotRunning);
  EXPECT_EQ(Run(mgr->Snapshot("sb_none")).error().code, Code::kSandboxNotFound);
  // Snapshots outlive their sandbox.
  EXPECT_EQ(mgr->ListSnapshots().size(), 2u);
}

TEST_F(CoreTest, FailedSnapshotLeavesNoFilesOrRecord) {
  auto a = MustCreate();
  Inst(a.id)->fail_capture = MakeError(Code::kInternal, "copy failed");
  EXPECT_FALSE(Run(mgr->Snapshot(a.id)).ok());
  Inst(a.id)->fail_capture.reset();
  BreakStoreWrites("snapshots");
  EXPECT_FALSE(Run(mgr->Snapshot(a.id)).ok());
  FixStoreWrites("snapshots");
  EXPECT_TRUE(mgr->ListSnapshots().empty());
  EXPECT_EQ(CountEntries(opts.snapshots_dir), 0u);
  EXPECT_TRUE(store->LoadSnapshots()->empty());
}

TEST_F(CoreTest, CreateFromSnapshotStacksLayers) {
  AddTemplate("svc");
  CreateOptions o;
  o.template_name = "svc";
  auto a = MustCreate(o);
  auto s1 = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->layers, (std::vector<std::string>{s1->layers[0], dir + "/builds/hsvc/layer"}));
  CreateOptions from;
  from.snapshot = s1->id;
  auto b = MustCreate(from);
  EXPECT_EQ(b.snapshot, s1->id);
  EXPECT_EQ(b.template_name, "svc");
  EXPECT_EQ(driver->last_spec()->layers, s1->layers);
  auto s2 = Run(mgr->Snapshot(b.id));
  ASSERT_TRUE(s2.ok());
  ASSERT_EQ(s2->layers.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(s2->layers.begin() + 1, s2->layers.end()), s1->layers);
}

TEST_F(CoreTest, DeletedSnapshotKeepsFilesWhileUsed) {
  auto a = MustCreate();
  auto s = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(s.ok());
  CreateOptions from;
  from.snapshot = s->id;
  auto b = MustCreate(from);
  ASSERT_TRUE(mgr->DeleteSnapshot(s->id).ok());
  EXPECT_EQ(mgr->GetSnapshot(s->id).error().code, Code::kSnapshotNotFound);
  EXPECT_EQ(mgr->DeleteSnapshot(s->id).error().code, Code::kSnapshotNotFound);
  EXPECT_TRUE(mgr->ListSnapshots().empty());
  // No new sandbox from it, but b still stands on its files.
  EXPECT_EQ(Create(from).error().code, Code::kSnapshotNotFound);
  EXPECT_TRUE(fs::exists(s->layers[0]));
  EXPECT_EQ(mgr->UsedLowerDirs().count(s->layers[0]), 1u);
  // b paused still stands on it; stopped does not.
  ASSERT_TRUE(mgr->Pause(b.id).ok());
  EXPECT_TRUE(fs::exists(s->layers[0]));
  ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
  EXPECT_FALSE(fs::exists(opts.snapshots_dir + "/" + s->id));
  EXPECT_TRUE(store->LoadSnapshots()->empty());
}

TEST_F(CoreTest, DeletedSnapshotKeepsFilesWhileASnapshotStandsOnIt) {
  auto a = MustCreate();
  auto s1 = Run(mgr->Snapshot(a.id));
  CreateOptions from;
  from.snapshot = s1->id;
  auto b = MustCreate(from);
  auto s2 = Run(mgr->Snapshot(b.id));
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
  ASSERT_TRUE(mgr->DeleteSnapshot(s1->id).ok());
  EXPECT_TRUE(fs::exists(s1->layers[0]));  // s2's stack has it
  ASSERT_TRUE(mgr->DeleteSnapshot(s2->id).ok());
  EXPECT_FALSE(fs::exists(s1->layers[0]));
  EXPECT_FALSE(fs::exists(s2->layers[0]));
}

TEST_F(CoreTest, SnapshotsSurviveARestartAndOrphanLayersGo) {
  auto a = MustCreate();
  auto s = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(s.ok());
  fs::create_directories(opts.snapshots_dir + "/snap_cut/layer");  // a capture cut by a crash
  Restart();
  EXPECT_TRUE(mgr->GetSnapshot(s->id).ok());
  EXPECT_TRUE(fs::exists(s->layers[0]));
  EXPECT_FALSE(fs::exists(opts.snapshots_dir + "/snap_cut"));
}

TEST_F(CoreTest, ForkMakesChildrenOnAnInternalSnapshot) {
  CreateOptions o;
  o.metadata["app"] = "x";
  o.env["E"] = "1";
  o.network.mode = net::NetMode::kAll;
  auto parent = MustCreate(o);
  auto kids = Run(mgr->Fork(parent.id, 3, "owner"));
  ASSERT_TRUE(kids.ok()) << kids.error().message;
  ASSERT_EQ(kids->size(), 3u);
  std::set<int> slots;
  for (const auto& k : *kids) {
    EXPECT_EQ(k.status, S::kRunning);
    EXPECT_EQ(k.metadata.at("hutch.fork_of"), parent.id);
    EXPECT_EQ(k.metadata.at("app"), "x");
    EXPECT_EQ(k.env.at("E"), "1");
    EXPECT_EQ(k.owner_key, "owner");
    ASSERT_EQ(k.layers.size(), 1u);
    EXPECT_TRUE(fs::exists(k.layers[0] + "/fake-layer"));
    slots.insert(k.net_slot);
  }
  EXPECT_EQ(slots.size(), 3u);                // each child its own subnet
  EXPECT_TRUE(mgr->ListSnapshots().empty());  // internal: not listed
  const std::string layer = (*kids)[0].layers[0];
  for (const auto& k : *kids) ASSERT_TRUE(Run(mgr->Delete(k.id)).ok());
  EXPECT_FALSE(fs::exists(layer));  // its last child gone, the layer goes
  EXPECT_EQ(CountEntries(opts.snapshots_dir), 0u);
}

TEST_F(CoreTest, ForkIsAllOrNothing) {
  auto parent = MustCreate();
  driver->fail_create = MakeError(Code::kInternal, "clone failed");
  driver->fail_create_skip = 1;  // the first child starts, the second fails
  auto kids = Run(mgr->Fork(parent.id, 3, ""));
  ASSERT_FALSE(kids.ok());
  EXPECT_NE(kids.error().message.find("fork child 2 of 3"), std::string::npos)
      << kids.error().message;
  EXPECT_EQ(driver->live(), std::set<std::string>{parent.id});
  EXPECT_EQ(mgr->running_count(), 1u);
  EXPECT_EQ(CountEntries(opts.snapshots_dir), 0u);
}

TEST_F(CoreTest, ForkChecksCountCapacityAndState) {
  opts.max_sandboxes = 3;
  opts.max_fork = 4;
  Restart();
  auto parent = MustCreate();
  EXPECT_EQ(Run(mgr->Fork(parent.id, 0, "")).error().code, Code::kInvalidRequest);
  EXPECT_EQ(Run(mgr->Fork(parent.id, 5, "")).error().code, Code::kInvalidRequest);
  EXPECT_EQ(Run(mgr->Fork(parent.id, 3, "")).error().code, Code::kCapacityExhausted);
  Inst(parent.id)->fail_capture = MakeError(Code::kInternal, "copy failed");
  EXPECT_FALSE(Run(mgr->Fork(parent.id, 1, "")).ok());
  EXPECT_EQ(CountEntries(opts.snapshots_dir), 0u);
  ASSERT_TRUE(Run(mgr->Delete(parent.id)).ok());
  EXPECT_EQ(Run(mgr->Fork(parent.id, 1, "")).error().code, Code::kSandboxNotRunning);
  ExpectNothingHeld();
}

}  // namespace
}  // namespace hutch::testing
