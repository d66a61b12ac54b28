// The sandboxes' event logs over the fake driver: what the lifecycle
// records (network policy and snapshots included), the cap that keeps
// only the newest events, seqs that go on across a restart, a failure's
// reason, a template's own commands left out, and the log forgotten with
// the sandbox's record; events written to the store in batches.
#include <gtest/gtest.h>

#include "core/exec_session.h"
#include "tests/core/core_fixture.h"

namespace hutch::testing {
namespace {

std::vector<SandboxEvent> Events(SandboxManager& mgr, const std::string& id,
                                 EventLevel min = EventLevel::kDebug) {
  EventFilter f;
  f.limit = 10000;
  f.min_level = min;
  auto r = mgr.events().Read(id, f);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<SandboxEvent>{};
}

std::vector<std::string> Types(const std::vector<SandboxEvent>& es) {
  std::vector<std::string> out;
  for (const auto& e : es) out.push_back(e.type);
  return out;
}

TEST_F(CoreTest, LifecycleIsLoggedInOrder) {
  auto a = MustCreate();
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  ASSERT_TRUE(mgr->Resume(a.id).ok());
  ASSERT_TRUE(mgr->SetTtl(a.id, 900).ok());
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  auto es = Events(*mgr, a.id);
  EXPECT_EQ(Types(es), (std::vector<std::string>{"created", "started", "paused", "resumed",
                                                 "ttl_changed", "stopped"}));
  for (size_t i = 0; i < es.size(); ++i) EXPECT_EQ(es[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_EQ(es[0].fields["template"], "base");
  EXPECT_EQ(es[0].fields["driver"], "fake");
  EXPECT_EQ(es[0].fields["memory_mb"], 512);
  EXPECT_EQ(es[4].fields["ttl_seconds"], 900);
  EXPECT_EQ(es[5].fields["reason"], "deleted");
  // A paused sandbox paused again records nothing new.
  EXPECT_EQ(mgr->events().last_seq(a.id), 6);
}

TEST_F(CoreTest, EventLogKeepsOnlyTheNewestCapEvents) {
  opts.events_per_sandbox = 4;
  Restart();
  auto a = MustCreate();  // 2 events
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(mgr->Pause(a.id).ok());
    ASSERT_TRUE(mgr->Resume(a.id).ok());
  }  // 8 events in all
  auto es = Events(*mgr, a.id);
  ASSERT_EQ(es.size(), 4u);
  EXPECT_EQ(es.front().seq, 5);
  EXPECT_EQ(es.back().seq, 8);
  EXPECT_EQ(Types(es), (std::vector<std::string>{"paused", "resumed", "paused", "resumed"}));
  // Paging: after a seq, a limit, a level.
  EventFilter f;
  f.after_seq = 6;
  f.limit = 1;
  auto page = mgr->events().Read(a.id, f);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].seq, 7);
  EXPECT_TRUE(Events(*mgr, a.id, EventLevel::kWarn).empty());
}

TEST_F(CoreTest, EventSeqsGoOnAfterARestart) {
  auto a = MustCreate();
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  Restart();
  auto es = Events(*mgr, a.id);
  ASSERT_EQ(Types(es), (std::vector<std::string>{"created", "started", "paused", "adopted"}));
  EXPECT_EQ(es.back().seq, 4);
  ASSERT_TRUE(mgr->Resume(a.id).ok());
  EXPECT_EQ(Events(*mgr, a.id).back().seq, 5);
}

TEST_F(CoreTest, FailureAndLostSandboxesAreLoggedAsErrors) {
  auto a = MustCreate();
  auto b = MustCreate();
  Inst(a.id)->Lose("agent exited");
  Poll();
  auto errs = Events(*mgr, a.id, EventLevel::kError);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].type, "failed");
  EXPECT_NE(errs[0].fields["reason"].get<std::string>().find("agent exited"), std::string::npos);
  driver->fail_adopt = MakeError(Code::kInternal, "gone");
  Restart();
  auto lost = Events(*mgr, b.id, EventLevel::kError);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].type, "failed");
  EXPECT_NE(lost[0].message.find("lost while hutchd was down"), std::string::npos);
}

TEST_F(CoreTest, ExecsAreLoggedButNotATemplatesReadyChecks) {
  AddTemplate("svc", "", "true");
  CreateOptions o;
  o.template_name = "svc";
  auto a = MustCreate(o);
  // The ready check ran as an exec before the create was answered.
  EXPECT_EQ(Types(Events(*mgr, a.id)), (std::vector<std::string>{"created", "started"}));
  auto sb = mgr->GetRunning(a.id);
  ASSERT_TRUE(sb.ok());
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "exit 3"};
  auto res = Run(RunExec(*sb, req, 1024));
  ASSERT_TRUE(res.ok()) << res.error().message;
  auto es = Events(*mgr, a.id);
  ASSERT_EQ(Types(es),
            (std::vector<std::string>{"created", "started", "process_started", "process_exited"}));
  EXPECT_EQ(es[2].level, EventLevel::kDebug);
  EXPECT_EQ(es[3].fields["command"], "/bin/sh -c exit 3");
  EXPECT_EQ(es[3].fields["exit_code"], res->exit.exit_code);
  EXPECT_EQ(es[3].level, res->exit.exit_code == 0 ? EventLevel::kInfo : EventLevel::kWarn);
}

TEST_F(CoreTest, NetworkPolicyChangesAndSnapshotsAreLogged) {
  CreateOptions o;
  o.network.mode = net::NetMode::kAll;
  auto a = MustCreate(o);
  net::NetworkPolicy none;
  ASSERT_TRUE(Run(mgr->SetNetworkPolicy(a.id, none)).ok());
  auto snap = Run(mgr->Snapshot(a.id));
  ASSERT_TRUE(snap.ok()) << snap.error().message;
  auto es = Events(*mgr, a.id);
  ASSERT_EQ(Types(es), (std::vector<std::string>{"created", "started", "network_policy_changed",
                                                 "snapshot_taken"}));
  EXPECT_EQ(es[0].fields["network"], "all");
  EXPECT_EQ(es[2].fields["mode"], "none");
  EXPECT_EQ(es[3].fields["snapshot"], snap->id);
}

// Recording costs no commit: the events wait in memory and reach the store
// in one batch when flushed (on a read, the reaper's tick, or the log's end).
TEST_F(CoreTest, EventsReachTheStoreInBatches) {
  auto a = MustCreate();
  ASSERT_TRUE(mgr->Pause(a.id).ok());
  store::EventQuery q;
  q.limit = 100;
  auto before = store->LoadEvents(a.id, q);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->empty());  // nothing written yet
  mgr->events().Flush();
  auto after = store->LoadEvents(a.id, q);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 3u);
  EXPECT_EQ(after->back().type, "paused");
  // A read always sees what was recorded, flushed or not.
  ASSERT_TRUE(mgr->Resume(a.id).ok());
  EXPECT_EQ(Types(Events(*mgr, a.id)).back(), "resumed");
}

TEST_F(CoreTest, EventLogGoesWithTheSandboxRecord) {
  opts.tombstone_ttl = std::chrono::seconds(0);
  Restart();
  auto a = MustCreate();
  ASSERT_TRUE(Run(mgr->Delete(a.id)).ok());
  EXPECT_FALSE(Events(*mgr, a.id).empty());
  Run(mgr->reaper().Tick());
  EXPECT_TRUE(Events(*mgr, a.id).empty());
  EXPECT_EQ(mgr->events().last_seq(a.id), 0);
}

}  // namespace
}  // namespace hutch::testing
