// Pieces of the vm driver that need no VM: the initramfs archive writer
// (checked against the system's cpio), QEMU's command line and the merged
// view a layered template's image is built from.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "driver/vm/cpio_archive.h"
#include "driver/vm/merged_view.h"
#include "driver/vm/qemu_command.h"
#include "driver/vm/sealed_ram.h"
#include "tests/support/test_server.h"

using namespace hutch::vm;

TEST(CpioArchive, SystemCpioListsAndExtractsEntries) {
  const std::string data(1001, 'x');  // not a multiple of 4: padding is needed
  const std::string a = CpioNewc({{"dir", S_IFDIR | 0755, ""},
                                  {"dir/init", S_IFREG | 0755, data},
                                  {"hutch-agent", S_IFREG | 0755, "agent"}});
  EXPECT_EQ(a.size() % 4, 0u);
  EXPECT_EQ(a.rfind("070701", 0), 0u);
  EXPECT_NE(a.find("TRAILER!!!"), std::string::npos);
  const std::string dir = hutch::testing::TempDir("cpio");
  std::ofstream(dir + "/a.cpio", std::ios::binary) << a;
  EXPECT_EQ(hutch::testing::HostSh("cpio -t --quiet < " + dir + "/a.cpio"),
            "dir\ndir/init\nhutch-agent\n");
  EXPECT_EQ(
      hutch::testing::HostSh("cd " + dir + " && cpio -i --quiet --to-stdout dir/init < a.cpio"),
      data);
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
  // Every VM names its RAM block "ram", so any VM's state loads into any
  // other of the same size.
  EXPECT_TRUE(has("q35,memory-backend=ram"));
  EXPECT_TRUE(has("memory-backend-ram,id=ram,size=300M"));
  EXPECT_FALSE(has("-incoming"));
  QemuConfig r = c;
  r.ram = RamKind::kPrivateFile;
  r.ram_path = "/proc/self/fd/4";
  r.incoming = true;
  const auto ra = QemuArgv(r);
  auto rhas = [&](const std::string& s) { return std::find(ra.begin(), ra.end(), s) != ra.end(); };
  EXPECT_TRUE(rhas("memory-backend-file,id=ram,size=300M,share=off,mem-path=/proc/self/fd/4"));
  EXPECT_TRUE(rhas("defer"));
  r.ram = RamKind::kSharedFile;
  r.ram_path = "ram";
  const auto ba = QemuArgv(r);
  EXPECT_NE(
      std::find(ba.begin(), ba.end(), "memory-backend-file,id=ram,size=300M,share=on,mem-path=ram"),
      ba.end());
  c.accel = Accel::kKvm;
  const auto k = QemuArgv(c);
  EXPECT_NE(std::find(k.begin(), k.end(), "kvm"), k.end());
}

namespace {
bool Mounted(const std::string& path) {
  return hutch::testing::HostSh("grep -c ' " + path + " ' /proc/self/mountinfo || true") != "0\n";
}
}  // namespace

TEST(MergedView, ShowsTheStackWithWhiteoutsAndLeavesNothing) {
  const std::string dir = hutch::testing::TempDir("merged");
  hutch::testing::HostSh("mkdir -p " + dir + "/root/etc " + dir + "/layer/etc && echo a > " + dir +
                         "/root/etc/kept && echo b > " + dir + "/root/etc/gone && echo c > " + dir +
                         "/layer/etc/new");
  ASSERT_EQ(mknod((dir + "/layer/etc/gone").c_str(), S_IFCHR | 0000, makedev(0, 0)),
            0);  // a whiteout
  const std::string mp = dir + "/.merge-test";
  {
    auto v = MergedView::Mount(mp, {dir + "/layer", dir + "/root"});
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(hutch::testing::HostSh("ls " + mp + "/etc"), "kept\nnew\n");
    EXPECT_NE(access((mp + "/etc/kept").c_str(), W_OK), 0);  // read-only
    EXPECT_TRUE(Mounted(mp));
  }
  EXPECT_FALSE(Mounted(mp));
  EXPECT_NE(access(mp.c_str(), F_OK), 0) << "mount point left";
  // A layer path overlayfs would split is refused, nothing created.
  EXPECT_FALSE(MergedView::Mount(mp, {dir + "/la:yer", dir + "/root"}).ok());
  EXPECT_NE(access(mp.c_str(), F_OK), 0);

  // A crashed build's view: mounted by a process that died; removed at start.
  hutch::testing::HostSh("mkdir " + mp + " && mount -t overlay overlay -o ro,lowerdir=" + dir +
                         "/layer:" + dir + "/root " + mp);
  ASSERT_TRUE(Mounted(mp));
  EXPECT_EQ(RemoveStaleMergedViews(dir), 1);
  EXPECT_FALSE(Mounted(mp));
  EXPECT_NE(access(mp.c_str(), F_OK), 0);
  EXPECT_EQ(hutch::testing::HostSh("ls " + dir + "/root/etc"), "gone\nkept\n")
      << "the stack itself untouched";
  hutch::testing::HostSh("rm -rf " + dir);
}

// A boot snapshot's RAM as every restore maps it: the same bytes, and no
// process can change them (QEMU opens it read-write, see sealed_ram.h).
TEST(SealedRam, SameBytesAndNobodyCanWrite) {
  const std::string dir = hutch::testing::TempDir("sealed");
  const std::string path = dir + "/ram";
  {
    std::ofstream out(path, std::ios::binary);
    out.seekp(3 * 4096 + 17);
    out << "guest page";
    out.seekp(64 * 4096 - 1);
    out.put('\0');
  }
  auto mem = hutch::vm::SealedCopy(path);
  ASSERT_TRUE(mem.ok()) << mem.error().message;
  struct stat st;
  ASSERT_EQ(fstat(mem->get(), &st), 0);
  EXPECT_EQ(st.st_size, 64 * 4096);
  char buf[10] = {};
  ASSERT_EQ(pread(mem->get(), buf, sizeof buf, 3 * 4096 + 17), 10);
  EXPECT_EQ(std::string(buf, 10), "guest page");
  EXPECT_EQ(pwrite(mem->get(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(mem->get(), 4096), -1);
  // Reopened read-write through /proc (as QEMU does) and mapped private:
  // writes stay in the mapping.
  hutch::UniqueFd again(
      open(("/proc/self/fd/" + std::to_string(mem->get())).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(again.valid());
  void* m = mmap(nullptr, 64 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, again.get(), 0);
  ASSERT_NE(m, MAP_FAILED);
  static_cast<char*>(m)[3 * 4096 + 17] = 'G';
  munmap(m, 64 * 4096);
  ASSERT_EQ(pread(mem->get(), buf, sizeof buf, 3 * 4096 + 17), 10);
  EXPECT_EQ(buf[0], 'g');
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, again.get(), 0), MAP_FAILED);
  hutch::testing::HostSh("rm -rf " + dir);
}
