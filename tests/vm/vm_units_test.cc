// Pieces of the vm driver that need no VM: the initramfs archive writer
// (checked against the system's cpio) and QEMU's command line.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "driver/vm/cpio_archive.h"
#include "driver/vm/qemu_command.h"
#include "tests/support/test_server.h"

using namespace hutch::vm;

TEST(CpioArchive, SystemCpioListsAndExtractsEntries) {
  const std::string data(1001, 'x');  // not a multiple of 4: padding is needed
  const std::string a = CpioNewc({{"dir", S_IFDIR | 0755, ""}, {"dir/init", S_IFREG | 0755, data},
                                  {"hutch-agent", S_IFREG | 0755, "agent"}});
  EXPECT_EQ(a.size() % 4, 0u);
  EXPECT_EQ(a.rfind("070701", 0), 0u);
  EXPECT_NE(a.find("TRAILER!!!"), std::string::npos);
  const std::string dir = hutch::testing::TempDir("cpio");
  std::ofstream(dir + "/a.cpio", std::ios::binary) << a;
  EXPECT_EQ(hutch::testing::HostSh("cpio -t --quiet < " + dir + "/a.cpio"), "dir\ndir/init\nhutch-agent\n");
  EXPECT_EQ(hutch::testing::HostSh("cd " + dir + " && cpio -i --quiet --to-stdout dir/init < a.cpio"), data);
  hutch::testing::HostSh("rm -rf " + dir);
}

TEST(QemuCommand, OnlyWhatTheGuestNeedsAndQemusOwnSeccomp) {
  QemuConfig c;
  c.sandbox_id = "sb_x";
  c.memory_mb = 300;
  c.vcpus = 2;
  const auto a = QemuArgv(c);
  auto has = [&](const std::string& s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  EXPECT_TRUE(has("-nodefaults"));
  EXPECT_TRUE(has("-no-user-config"));
  EXPECT_TRUE(has("-no-reboot"));
  EXPECT_TRUE(has("300M"));
  EXPECT_TRUE(has("tcg,tb-size=64"));
  EXPECT_TRUE(has("on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  // Relative paths only: QEMU runs in the sandbox dir.
  for (const auto& arg : a) {
    if (arg != c.qemu) {
      EXPECT_EQ(arg.find("/tmp"), std::string::npos) << arg;
    }
  }
  EXPECT_FALSE(has("-netdev"));
  c.accel = Accel::kKvm;
  const auto k = QemuArgv(c);
  EXPECT_NE(std::find(k.begin(), k.end(), "kvm"), k.end());
}
