// The vm driver's short path (issue 9): a sandbox created with
// "driver":"vm" boots its own kernel under QEMU, runs commands and file
// operations through the same /v1 calls as a jail sandbox, and leaves no
// QEMU behind once deleted. Long checks are in vm_lifecycle_slow_test.
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::testing::TestServer;
using namespace hutch::testing::vm;
using nlohmann::json;

TEST(VmSmoke, OwnKernelExecFilesDeleteLeavesNoQemu) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto r =
      c.Json("POST", "/v1/sandboxes", {{"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}});
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id = r.json()["id"];
  EXPECT_EQ(r.json()["driver"], "vm") << r.body;
  const pid_t qemu = QemuPid(s, id);
  EXPECT_TRUE(IsQemu(qemu)) << "no QEMU recorded for " << id;

  utsname host{};
  uname(&host);
  auto u = s.Exec(id, "uname -r; hostname");
  ASSERT_EQ(u["_status"], 200) << u.dump();
  EXPECT_NE(u["stdout"].get<std::string>().find(id), std::string::npos) << u.dump();
  EXPECT_EQ(u["stdout"].get<std::string>().rfind(std::string(host.release) + "\n", 0),
            std::string::npos)
      << "the guest runs the host's kernel: " << u.dump();

  auto e = s.Exec(id, "echo hi; echo oops >&2; exit 3");
  EXPECT_EQ(e["stdout"], "hi\n");
  EXPECT_EQ(e["stderr"], "oops\n");
  EXPECT_EQ(e["exit_code"], 3);

  const std::string data = "hello from the host\n";
  auto up = c.Request("PUT", "/v1/sandboxes/" + id + "/fs?path=/home/user/a.txt", data,
                      {{"Content-Type", "application/octet-stream"}});
  EXPECT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(s.Exec(id, "cat /home/user/a.txt")["stdout"], data);
  EXPECT_EQ(s.Exec(id, "echo back > /tmp/b.txt")["exit_code"], 0);
  auto down = c.Request("GET", "/v1/sandboxes/" + id + "/fs?path=/tmp/b.txt");
  EXPECT_EQ(down.status, 200);
  EXPECT_EQ(down.body, "back\n");

  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_TRUE(QemuGone(qemu)) << "QEMU " << qemu << " still runs after delete";
  EXPECT_FALSE(access((s.state_dir() + "/state/vm/sandboxes/" + id).c_str(), F_OK) == 0)
      << "sandbox dir left";
  EXPECT_EQ(s.Stop(), 0);
}

TEST(VmSmoke, UnknownDriverIs400) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  auto r = s.Client().Json("POST", "/v1/sandboxes", {{"driver", "firecracker"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["code"], "invalid_request");
  EXPECT_NE(r.body.find("firecracker"), std::string::npos);
}

// Guest RAM counts against the host's memory budget like a jail's limit:
// a VM that would exceed it is refused before anything boots, and nothing
// of it is left.
TEST(VmSmoke, MemoryOverTheHostBudgetIs503) {
  TestServer s({"--max-memory-committed-mb", "512"});
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  auto r =
      c.Json("POST", "/v1/sandboxes", {{"driver", "vm"}, {"memory_mb", 1024}, {"disk_mb", 256}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.json()["code"], "capacity_exhausted") << r.body;
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(s.state_dir() + "/state/vm/sandboxes", ec) || ec);
  EXPECT_EQ(c.Request("GET", "/v1/sandboxes").json()["items"].size(), 0u);
}
