// Issue 32, finding 3: a numeric user outside the sandbox's mapped range
// ran as root. 4294967295 is (uid_t)-1, which setresuid() reads as "leave
// this id unchanged", so the command kept the agent's root; other ids past
// 65535 map to no host uid at all. The agent refuses every id outside
// 0..65535 (the user namespace's mapping) with invalid_request, whichever
// dialect or operation carries it.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/shared_server.h"

namespace {

class UserIds : public hutch::testing::SharedServerTest {};

TEST_F(UserIds, OutOfRangeNumericUsersAreRefusedByExec) {
  for (const char* user : {"4294967295", "4294967294", "65536", "99999999999"}) {
    auto r = server().Client().Json("POST", "/v1/sandboxes/" + sandbox() + "/exec",
                                    {{"cmd", "id -u"}, {"user", user}});
    EXPECT_EQ(r.status, 400) << user << ": " << r.body;
    EXPECT_EQ(r.json().value("code", std::string()), "invalid_request") << user << ": " << r.body;
  }
}

TEST_F(UserIds, OutOfRangeNumericUsersAreRefusedByProcesses) {
  auto r = server().Client().Json("POST", "/v1/sandboxes/" + sandbox() + "/processes",
                                  {{"cmd", "sleep 1"}, {"user", "4294967295"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json().value("code", std::string()), "invalid_request") << r.body;
}

TEST_F(UserIds, OutOfRangeNumericUsersAreRefusedByFileOperations) {
  auto r = server().Client().Request(
      "GET", "/v1/sandboxes/" + sandbox() + "/fs?path=/etc/hostname&user=4294967295");
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST_F(UserIds, InRangeNumericUsersStillRun) {
  // The controls: the edges of the mapped range and an id without a passwd
  // entry.
  for (const char* user : {"0", "1000", "65534", "4242"}) {
    auto r = server().Client().Json("POST", "/v1/sandboxes/" + sandbox() + "/exec",
                                    {{"cmd", "id -u"}, {"user", user}});
    ASSERT_EQ(r.status, 200) << user << ": " << r.body;
    EXPECT_EQ(hutch::testing::StdoutOf(r.json()), std::string(user) + "\n") << r.body;
  }
}

}  // namespace
