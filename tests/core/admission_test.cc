// Admission (core/admission): creates are refused with capacity_exhausted
// by what the host really has — MemAvailable under the reserve (creates
// still starting charged), memory PSI, tasks and open files near the
// kernel's limits — with the count cap counting warm sandboxes and the
// sum-of-limits cap only when asked for. The host here is a HostStats
// the test sets: a host near exhaustion without exhausting one.
#include "core/admission.h"

#include <gtest/gtest.h>

#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

// A 24 GiB, 2-core host at rest, as measured on the CI machines.
HostStats IdleHost() {
  HostStats h;
  h.mem_total_mb = 24105;
  h.mem_available_mb = 21000;
  h.memory_full_avg10 = 0.0;
  h.tasks = 200;
  h.task_limit = 32768;
  h.files_open = 800;
  h.files_max = 2466093;
  return h;
}

class AdmissionTest : public ::testing::Test {
 protected:
  Admission Make(AdmissionOptions o = {}) {
    Admission a(o);
    a.set_stats_source([this]() -> Result<HostStats> { return host; });
    return a;
  }
  static void ExpectRefused(const Status& st, const std::string& names) {
    ASSERT_FALSE(st.ok()) << "admitted; expected a refusal naming " << names;
    EXPECT_EQ(st.error().code, Code::kCapacityExhausted);
    EXPECT_NE(st.error().message.find(names), std::string::npos) << st.error().message;
  }
  HostStats host = IdleHost();
};

TEST_F(AdmissionTest, AnIdleHostAdmitsAndTheSumOfLimitsIsNoCapByDefault) {
  AdmissionOptions o;
  o.max_sandboxes = 2000;
  // 1000 sandboxes of 512 MB on 24 GiB: twenty times the RAM in limits.
  EXPECT_TRUE(Make(o).Check({.live = 1000, .committed_mb = 512000}, {1, 512}).ok());
  AdmissionOptions capped;
  capped.max_sandboxes = 2000;
  capped.max_memory_committed_mb = 4096;
  ExpectRefused(Make(capped).Check({.live = 7, .committed_mb = 3584}, {1, 1024}),
                "--max-memory-committed-mb");
  EXPECT_TRUE(Make(capped).Check({.live = 7, .committed_mb = 3584}, {1, 512}).ok());
}

TEST_F(AdmissionTest, LowAvailableMemoryIsRefusedAndStartingCreatesAreCharged) {
  AdmissionOptions o;
  o.memory_reserve_mb = 2000;
  auto a = Make(o);
  host.mem_available_mb = 2000 + kStartingMemoryMb;  // room for exactly one start
  EXPECT_TRUE(a.Check({}, {1, 512}).ok());
  // The same figure with another create still starting: that one has not
  // shown in MemAvailable yet.
  ExpectRefused(a.Check({.starting = 1}, {1, 512}), "--memory-reserve-mb");
  // A small sandbox is charged no more than its limit.
  host.mem_available_mb = 2000 + 16;
  EXPECT_TRUE(a.Check({}, {1, 16}).ok());
  host.mem_available_mb = 1500;
  ExpectRefused(a.Check({}, {1, 16}), "memory is low");
}

TEST_F(AdmissionTest, MemoryPressureRefusesWhereTheKernelHasPsi) {
  AdmissionOptions o;
  o.memory_pressure_max = 10;
  auto a = Make(o);
  host.memory_full_avg10 = 9.9;
  EXPECT_TRUE(a.Check({}, {1, 128}).ok());
  host.memory_full_avg10 = 10;
  ExpectRefused(a.Check({}, {1, 128}), "--memory-pressure-max");
  // No PSI on this kernel: nothing to refuse on.
  host.memory_full_avg10.reset();
  EXPECT_TRUE(a.Check({}, {1, 128}).ok());
  // Turned off.
  host.memory_full_avg10 = 90;
  o.memory_pressure_max = 0;
  EXPECT_TRUE(Make(o).Check({}, {1, 128}).ok());
}

TEST_F(AdmissionTest, TasksAndOpenFilesNearTheKernelsLimitsAreRefused) {
  auto a = Make();
  host.tasks = 32768 - 3277;  // a tenth of pid_max is kept free
  ExpectRefused(a.Check({}, {1, 128}), "task limit");
  host.tasks = 200;
  host.files_open = host.files_max - 8000;
  ExpectRefused(a.Check({}, {1, 128}), "open-file limit");
  // A small limit keeps its floor free.
  host = IdleHost();
  host.files_max = 10000;
  host.files_open = 1900;
  ExpectRefused(a.Check({}, {1, 128}), "open-file limit");
}

TEST_F(AdmissionTest, AnUnreadableHostIsRefusedNotAdmitted) {
  Admission a{AdmissionOptions{}};
  a.set_stats_source([]() -> Result<HostStats> {
    return MakeError(Code::kInternal, "open /proc/meminfo: Too many open files");
  });
  ExpectRefused(a.Check({}, {1, 128}), "Too many open files");
}

TEST_F(AdmissionTest, TheCountCapCountsStartingAndWarmSandboxes) {
  AdmissionOptions o;
  o.max_sandboxes = 10;
  auto a = Make(o);
  EXPECT_TRUE(a.Check({.live = 5, .starting = 2, .warm = 2}, {1, 128}).ok());
  ExpectRefused(a.Check({.live = 5, .starting = 2, .warm = 3}, {1, 128}), "--max-sandboxes");
  ExpectRefused(a.Check({.live = 5}, {6, 128}), "--max-sandboxes");
}

TEST(AdmissionDefaults, AThousandIdleSandboxesFitOnA24GiBTwoCoreHost) {
  HostShape h{.mem_total_mb = 24105, .task_limit = 32768, .cores = 2, .fd_limit = 20000};
  // 1000 sandboxes and the code-interpreter warm one, with room to spare.
  EXPECT_GE(DefaultMaxSandboxes(h), 1001);
  // Each term bounds it: a small host gets a small default.
  EXPECT_EQ(DefaultMaxSandboxes(
                {.mem_total_mb = 2048, .task_limit = 32768, .cores = 2, .fd_limit = 20000}),
            128);
  EXPECT_EQ(DefaultMaxSandboxes(
                {.mem_total_mb = 24105, .task_limit = 4096, .cores = 2, .fd_limit = 20000}),
            256);
  EXPECT_EQ(DefaultMaxSandboxes(
                {.mem_total_mb = 1 << 20, .task_limit = 1 << 22, .cores = 1, .fd_limit = 1 << 20}),
            1024);
  EXPECT_EQ(DefaultMaxSandboxes(
                {.mem_total_mb = 24105, .task_limit = 32768, .cores = 2, .fd_limit = 4096}),
            256);
  EXPECT_EQ(DefaultMaxSandboxes(
                {.mem_total_mb = 24105, .task_limit = 32768, .cores = 2, .fd_limit = 1024}),
            1);
  EXPECT_EQ(DefaultMemoryReserveMb(24105), 2410);
  EXPECT_EQ(DefaultMemoryReserveMb(1024), 256);
  EXPECT_EQ(DefaultMemoryReserveMb(1 << 20), 4096);
}

// Through the manager: a create is refused before anything is acquired,
// a fork of several is refused whole, and the warm pool gives its
// sandboxes up for a create and does not refill while the host is short.
class ManagerAdmissionTest : public CoreTest {
 protected:
  void SetUp() override {
    host_stats = [this]() -> Result<HostStats> { return host; };
    opts.memory_reserve_mb = 2000;
    CoreTest::SetUp();
  }
  HostStats host = IdleHost();
};

TEST_F(ManagerAdmissionTest, ACreateOnAHostShortOfMemoryIsRefusedAndHoldsNothing) {
  auto a = MustCreate();
  host.mem_available_mb = 2010;
  auto r = Create();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kCapacityExhausted);
  EXPECT_NE(r.error().message.find("--memory-reserve-mb"), std::string::npos) << r.error().message;
  EXPECT_EQ(mgr->List({}).items.size(), 1u);
  EXPECT_EQ(driver->live().size(), 1u);
  // A fork is refused whole, before its snapshot.
  auto f = Run(mgr->Fork(a.id, 2, ""));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code, Code::kCapacityExhausted);
  EXPECT_EQ(CountEntries(opts.snapshots_dir), 0u);
  // Memory back: creates again.
  host.mem_available_mb = 20000;
  auto b = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
  ExpectNothingHeld();
}

TEST_F(ManagerAdmissionTest, TheWarmPoolYieldsToACreateAndWaitsForRoom) {
  AddTemplate("svc", "serve", "test -e /ready");
  opts.warm_pool = {{"svc", 1}};
  opts.max_sandboxes = 2;
  Restart();
  auto tick_until = [&](size_t n) {
    for (int i = 0; i < 200 && mgr->warm_count() != n; ++i) {
      Run(mgr->reaper().Tick());
      Poll();
    }
    return mgr->warm_count();
  };
  ASSERT_EQ(tick_until(1), 1u);
  // One live and one warm: the host's two. A create of another shape
  // takes the warm one's place instead of being refused.
  auto a = MustCreate();
  auto b = MustCreate();
  EXPECT_EQ(mgr->warm_count(), 0u);
  Poll();
  EXPECT_EQ(driver->live().size(), 2u);
  // Full: no refill while it is.
  for (int i = 0; i < 10; ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_EQ(mgr->warm_count(), 0u);
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  // Room in the count, not in memory: still no refill.
  host.mem_available_mb = 2010;
  for (int i = 0; i < 10; ++i) {
    Run(mgr->reaper().Tick());
    Poll();
  }
  EXPECT_EQ(mgr->warm_count(), 0u);
  host.mem_available_mb = 20000;
  EXPECT_EQ(tick_until(1), 1u);
  ASSERT_TRUE(Run(mgr->Delete(b.id)).ok());
}

}  // namespace
}  // namespace hutch::testing
