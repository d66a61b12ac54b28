// Cleanup: deleting a sandbox or stopping the server leaves no process,
// cgroup, directory or mount behind. (The escape, reach and exhaustion
// attempts of the design's hostile-workload list are tests/security/.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/host_probe.h"
#include "tests/support/hostile.h"
#include "tests/support/test_server.h"

using hutch::testing::StartDetached;
using hutch::testing::StdoutOf;
using hutch::testing::TestServer;
using namespace hutch::testing::probe;

TEST(Cleanup, DeleteLeavesNothingBehind) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::string id = s.CreateSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(StdoutOf(s.Exec(id, "echo hi")), "hi\n");
  ASSERT_EQ(StartDetached(s, id, "sleep 300")["_status"], 200);
  ASSERT_EQ(StartDetached(s, id, "sh -c 'sleep 301 & sleep 302'")["_status"], 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Footprint before = FootprintOf(s, id);
  ExpectLiveFootprint(before, id, 4);  // agent, sleeps, sh
  auto c = s.Client();
  ASSERT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  ExpectNothingLeft(s, id, before);
  EXPECT_EQ(StdoutOf(s.Exec(s.CreateSandbox(), "echo ok")), "ok\n");
}

TEST(Cleanup, StopLeavesNothingBehind) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  std::vector<std::string> ids = {s.CreateSandbox(), s.CreateSandbox()};
  std::map<std::string, Footprint> before;
  for (const auto& id : ids) {
    ASSERT_FALSE(id.empty());
    ASSERT_EQ(StartDetached(s, id, "sleep 300")["_status"], 200);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (const auto& id : ids) {
    before[id] = FootprintOf(s, id);
    ExpectLiveFootprint(before[id], id, 2);
  }
  int st = s.Stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << s.Log();
  for (const auto& id : ids) ExpectNothingLeft(s, id, before[id]);
}
