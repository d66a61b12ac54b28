// Issue 32, finding 6: one message over the agent wire's 1 MiB frame limit
// ended the sandbox for good (the reader drops the connection, the sandbox
// turns `failed`): a process started with a 600 KB command (its argv and
// its command both go in one request), or a listing of a directory of 5000
// long names (one answer). Requests over the limit are refused with 400
// before they reach the agent; a listing comes in parts under the limit
// (kFsEntries, then kFsResult). Either way the sandbox keeps running.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/support/shared_server.h"

namespace {

class Messages : public hutch::testing::SharedServerTest {
 protected:
  static std::string StatusOf(const std::string& id) {
    auto r = server().Client().Request("GET", "/v1/sandboxes/" + id);
    return r.json().is_object() ? r.json().value("status", "") : r.body;
  }
};

TEST_F(Messages, AProcessWithAHugeCommandIsRefusedAndTheSandboxLives) {
  const std::string id = server().CreateSandbox();
  ASSERT_FALSE(id.empty());
  const std::string cmd = "echo " + std::string(600 * 1024, 'x');
  auto r = server().Client().Json("POST", "/v1/sandboxes/" + id + "/processes", {{"cmd", cmd}});
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_EQ(r.json().value("code", ""), "invalid_request") << r.body.substr(0, 300);
  EXPECT_EQ(StatusOf(id), "running");
  EXPECT_EQ(hutch::testing::StdoutOf(server().Exec(id, "echo alive")), "alive\n");
  server().Client().Request("DELETE", "/v1/sandboxes/" + id);
}

TEST_F(Messages, ListingAHugeDirectoryDoesNotEndTheSandbox) {
  const std::string id = server().CreateSandbox();
  ASSERT_FALSE(id.empty());
  // 5000 names of 200 bytes: about 1.5 MB of JSON in one answer.
  auto made = server().Exec(
      id,
      "mkdir -p /tmp/big && cd /tmp/big && python3 -c \"\n"
      "for i in range(5000): open('%05d' % i + 'n' * 195, 'w').close()\" && ls | wc -l");
  ASSERT_EQ(hutch::testing::StdoutOf(made), "5000\n") << made.dump().substr(0, 300);
  auto r = server().Client().Request("GET", "/v1/sandboxes/" + id + "/fs/list?path=/tmp/big");
  // The whole listing, in parts on the agent wire; never the sandbox's end.
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  const auto listing = r.json();  // a copy: range-for over a temporary's member dangles
  ASSERT_EQ(listing["entries"].size(), 5000u);
  std::set<std::string> names;
  for (const auto& e : listing["entries"]) names.insert(e.value("name", ""));
  EXPECT_EQ(names.size(), 5000u);  // every part, none twice
  EXPECT_TRUE(names.count("04999" + std::string(195, 'n')));
  EXPECT_EQ(StatusOf(id), "running");
  EXPECT_EQ(hutch::testing::StdoutOf(server().Exec(id, "echo alive")), "alive\n");
  server().Client().Request("DELETE", "/v1/sandboxes/" + id);
}

}  // namespace
