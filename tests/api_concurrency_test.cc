// Many clients creating, using and deleting sandboxes at once. Under such
// load a create used to fail now and then with "read jail report: Resource
// temporarily unavailable" (a readiness wake-up with nothing to read; found
// by bench/hutch_load): every operation here must succeed.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_server.h"

using hutch::testing::TestServer;
using nlohmann::json;

TEST(Concurrency, ParallelCreateExecDeleteCyclesAllSucceed) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  constexpr int kWorkers = 4, kCycles = 25;
  const std::string blob(256 * 1024, 'x');
  std::atomic<int> ok{0};
  std::vector<std::string> failures(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto c = s.Client();
      for (int i = 0; i < kCycles; ++i) {
        auto cr = c.Json("POST", "/v1/sandboxes", json::object());
        if (cr.status != 201) {
          failures[w] += "create " + std::to_string(cr.status) + " " + cr.body + "\n";
          continue;
        }
        std::string id = cr.json()["id"];
        auto ex =
            c.Json("POST", "/v1/sandboxes/" + id + "/exec", {{"cmd", "echo " + std::to_string(i)}});
        if (ex.status != 200 || ex.json().value("stdout", "") != std::to_string(i) + "\n")
          failures[w] += "exec " + ex.body + "\n";
        int events = 0;
        auto st = c.Sse("/v1/sandboxes/" + id + "/exec/stream",
                        {{"cmd", "for i in 1 2 3; do echo $i; done"}},
                        [&](const hutch::client::SseEvent&) { return ++events > 0; });
        if (st.status != 200 || events < 2)
          failures[w] += "stream " + std::to_string(st.status) + "\n";
        auto up = c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/tmp/blob", blob);
        auto down = c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/tmp/blob");
        if (up.status != 201 || down.body != blob) failures[w] += "files " + up.body + "\n";
        auto del = c.Request("DELETE", "/v1/sandboxes/" + id);
        if (del.status != 204) failures[w] += "delete " + del.body + "\n";
        else ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(failures[w], "") << "worker " << w;
  EXPECT_EQ(ok.load(), kWorkers * kCycles);
  auto list = s.Client().Request("GET", "/v1/sandboxes?status=running").json();
  EXPECT_EQ(list["items"].size(), 0u);
}
