// OCI images on the vm driver (issue 31 item 5): an image pulled from a
// loopback registry (tests/support/oci_test_image.sh: three layers, one a
// whiteout; User app, WorkingDir /home/app, Env GREETING) becomes the
// guest's root disk through the vm driver's image builder, like any
// template stack. The guest sees the image's files with the whiteout
// applied, runs commands as the image's user in its workdir with its env,
// and a jail sandbox of the same image shares the one pull.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/exposition.h"
#include "tests/support/local_registry.h"
#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::testing::LocalRegistry;
using hutch::testing::ParseExposition;
using hutch::testing::TestServer;
using namespace hutch::testing::vm;
using nlohmann::json;

namespace {

constexpr const char* kProbe =
    "cat /etc/first.txt /etc/second.txt /etc/mark.txt; "
    "test -e /etc/deleted.txt && echo deleted-present || echo deleted-gone; "
    "id -u; pwd; echo \"$GREETING\"";
constexpr const char* kProbeOut = "one\ntwo\nvm\ndeleted-gone\n1000\n/home/app\nhello\n";

}  // namespace

TEST(VmImage, ImageBootsAsTheGuestRootWithItsUserWorkdirAndEnv) {
  LocalRegistry reg;
  ASSERT_TRUE(reg.Up());
  ASSERT_EQ(reg.Push("hutch/vmimage:1", "vm"), "");
  TestServer s({"--image-insecure-registry", reg.addr()});
  ASSERT_TRUE(s.ok());
  auto c = s.Client();
  const std::string ref = reg.addr() + "/hutch/vmimage:1";

  auto r = c.Json("POST", "/v1/sandboxes",
                  {{"image", ref}, {"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}});
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string vm = r.json()["id"];
  EXPECT_EQ(r.json().value("driver", ""), "vm") << r.body;
  const pid_t qemu = QemuPid(s, vm);
  EXPECT_TRUE(IsQemu(qemu));
  auto p = s.Exec(vm, kProbe);
  ASSERT_EQ(p.value("exit_code", -1), 0) << p.dump();
  EXPECT_EQ(p.value("stdout", ""), kProbeOut);

  // The same image in a jail: no second pull.
  const std::string jail = s.CreateSandbox({{"image", ref}});
  auto pj = s.Exec(jail, kProbe);
  EXPECT_EQ(pj.value("stdout", ""), kProbeOut) << pj.dump();
  const auto m = ParseExposition(c.Request("GET", "/metrics").body);
  EXPECT_EQ(m.Value("hutch_image_pulls").value_or(-1), 1);
  EXPECT_EQ(m.Value("hutch_image_cache_hits").value_or(-1), 1);

  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + vm).status, 204);
  EXPECT_TRUE(QemuGone(qemu));
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + jail).status, 204);
  EXPECT_EQ(s.Stop(), 0);
}
