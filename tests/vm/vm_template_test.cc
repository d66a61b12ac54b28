// Layered stacks on the vm driver (issues 9 and 11): a template built from
// a spec (its run step's files, deletions and replaced directories in a
// layer over `base`) and a file snapshot of a jail sandbox of it both boot
// as vm sandboxes, which see the stack exactly as a jail sandbox does. The
// image build's overlay mount and temp dirs never outlive the build, and a
// crashed build's leftovers are removed at start.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/mount_points.h"
#include "tests/support/test_server.h"
#include "tests/vm/vm_support.h"

using hutch::testing::MountPointsUnder;
using hutch::testing::TestServer;
using namespace hutch::testing::vm;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A file written (owned by 1000 in the guest), a file of `base` deleted
// (a whiteout) and a directory of `base` replaced (an opaque directory).
const char* kSpec = R"(
name = "vmtpl"
from = "base"
run = ["mkdir -p /opt/vmtpl && echo from-run > /opt/vmtpl/greeting.txt && chown 1000:1000 /opt/vmtpl/greeting.txt && rm /etc/bindresvport.blacklist && rm -rf /etc/skel && mkdir /etc/skel && echo only > /etc/skel/only"]
)";

const char* kProbe =
    "cat /opt/vmtpl/greeting.txt; stat -c %u /opt/vmtpl/greeting.txt; "
    "test -e /etc/bindresvport.blacklist && echo present || echo absent; ls -A /etc/skel";
const char* kProbeOut = "from-run\n1000\nabsent\nonly\n";

json BuildTemplate(const TestServer& s, const std::string& spec) {
  json done;
  auto r =
      s.Client().SseRequest("POST", "/v1/templates", spec,
                            {{"Content-Type", "application/toml"}, {"Accept", "text/event-stream"}},
                            [&](const hutch::client::SseEvent& e) {
                              if (e.event == "done" || e.event == "error")
                                done = json::parse(e.data, nullptr, false);
                              return true;
                            });
  EXPECT_EQ(r.status, 200) << r.body;
  return done;
}

// Entries of the images dir that are not finished images: merged views,
// build copies, half-written files.
std::vector<std::string> ImageTemps(const TestServer& s) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.state_dir() + "/state/vm/images", ec)) {
    const std::string n = e.path().filename().string();
    if (n[0] == '.' || n.find(".tmp") != std::string::npos) out.push_back(n);
  }
  return out;
}

int RootfsImages(const TestServer& s) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.state_dir() + "/state/vm/images", ec))
    if (e.path().filename().string().rfind("rootfs-", 0) == 0) ++n;
  return n;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

}  // namespace

TEST(VmTemplate, BuiltTemplateAndFileSnapshotBootWithTheirLayers) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  json done = BuildTemplate(s, kSpec);
  ASSERT_TRUE(done.contains("template")) << done.dump();

  // The template: one layer over base.
  auto c = s.Client();
  auto r = c.Json("POST", "/v1/sandboxes",
                  {{"template", "vmtpl"}, {"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}});
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string vm1 = r.json()["id"];
  const pid_t qemu1 = QemuPid(s, vm1);
  auto p = s.Exec(vm1, kProbe);
  ASSERT_EQ(p.value("exit_code", -1), 0) << p.dump();
  EXPECT_EQ(p.value("stdout", ""), kProbeOut);
  EXPECT_EQ(RootfsImages(s), 1);
  EXPECT_EQ(Joined(ImageTemps(s)), "");
  EXPECT_EQ(Joined(MountPointsUnder(s.state_dir())), "") << "a merged view outlived its build";
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + vm1).status, 204);
  EXPECT_TRUE(QemuGone(qemu1));

  // A file snapshot of a jail sandbox of it: its own layer over the
  // template's, with one more deletion and one more file.
  const std::string jail = s.CreateSandbox({{"template", "vmtpl"}});
  auto w = s.Exec(jail, "echo snap > /opt/vmtpl/snap.txt && rm /opt/vmtpl/greeting.txt");
  ASSERT_EQ(w.value("exit_code", -1), 0) << w.dump();
  auto snap = c.Request("POST", "/v1/sandboxes/" + jail + "/snapshots");
  ASSERT_EQ(snap.status, 201) << snap.body;
  const std::string sid = snap.json()["id"];
  auto r2 = c.Json("POST", "/v1/sandboxes",
                   {{"snapshot", sid}, {"driver", "vm"}, {"memory_mb", 256}, {"disk_mb", 256}});
  ASSERT_EQ(r2.status, 201) << r2.body;
  const std::string vm2 = r2.json()["id"];
  const pid_t qemu2 = QemuPid(s, vm2);
  auto p2 = s.Exec(vm2,
                   "ls -A /opt/vmtpl; cat /opt/vmtpl/snap.txt; ls -A /etc/skel; test -e "
                   "/etc/bindresvport.blacklist || echo absent");
  ASSERT_EQ(p2.value("exit_code", -1), 0) << p2.dump();
  EXPECT_EQ(p2.value("stdout", ""), "snap.txt\nsnap\nonly\nabsent\n");
  EXPECT_EQ(RootfsImages(s), 2);
  EXPECT_EQ(Joined(ImageTemps(s)), "");
  EXPECT_EQ(Joined(MountPointsUnder(s.state_dir())), "");
  EXPECT_EQ(c.Request("DELETE", "/v1/sandboxes/" + vm2).status, 204);
  EXPECT_TRUE(QemuGone(qemu2));
  EXPECT_EQ(s.Stop(), 0);
}

TEST(VmTemplate, CrashedBuildLeftoversAreRemovedAtStart) {
  TestServer s;
  ASSERT_TRUE(s.ok());
  // The vm driver made its images dir at start.
  const std::string images = s.state_dir() + "/state/vm/images";
  ASSERT_EQ(access(images.c_str(), F_OK), 0);
  ASSERT_EQ(s.Stop(), 0);
  // What a hutchd killed mid-build leaves: a mounted view, a build copy, a
  // half-written image.
  const std::string view = images + "/.merge-0123456789abcdef";
  ASSERT_EQ(mkdir(view.c_str(), 0700), 0);
  ASSERT_EQ(mount("tmpfs", view.c_str(), "tmpfs", MS_RDONLY, "size=64k"), 0) << strerror(errno);
  fs::create_directories(images + "/.build-0123456789abcdef/tree/etc");
  std::ofstream(images + "/rootfs-0123456789abcdef.img.tmp") << "half";
  s.Restart();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Joined(ImageTemps(s)), "");
  EXPECT_EQ(Joined(MountPointsUnder(s.state_dir())), "");
  if (!MountPointsUnder(view).empty())
    umount2(view.c_str(), MNT_DETACH);  // never leave ours behind
  EXPECT_EQ(s.Stop(), 0);
}
