// The jail sandboxes' disk pool (driver/jail/disk_pool) on its own: images
// are ext4, sparse, made ahead per size in recent use and taken by rename.
// mkfs.ext4 on a plain file needs no root; the pool that hands disks out
// attached to loop devices does (skipped without).
#include "driver/jail/disk_pool.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/blocking_worker.h"
#include "common/ext4_image.h"

namespace fs = std::filesystem;
using hutch::jail::DiskPool;
using hutch::jail::SandboxDiskInodes;

namespace {

class DiskPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-disk-pool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Takes a disk into dir_/<name>, then lets the refill run to its end.
  hutch::Result<hutch::jail::WritableLayer> TakeDisk(DiskPool& pool, int64_t mb,
                                                     const std::string& name) {
    std::optional<hutch::Result<hutch::jail::WritableLayer>> out;
    boost::asio::co_spawn(
        io_,
        [&]() -> boost::asio::awaitable<void> {
          out.emplace(co_await pool.Take(mb, dir_ + "/" + name));
        },
        boost::asio::detached);
    io_.restart();
    io_.run();
    return std::move(*out);
  }
  hutch::Status Take(DiskPool& pool, int64_t mb, const std::string& name) {
    auto d = TakeDisk(pool, mb, name);
    if (!d.ok()) return d.error();
    return {};
  }
  // Files in the pool's directory.
  // Images waiting in the pool (not the golden image each size is copied
  // from).
  size_t PoolFiles() const {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir_ + "/pool", ec))
      n += e.path().filename().string().rfind("golden-", 0) != 0;
    return n;
  }
  size_t GoldenFiles() const {
    size_t n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir_ + "/pool", ec))
      n += e.path().filename().string().rfind("golden-", 0) == 0;
    return n;
  }

  boost::asio::io_context io_;
  hutch::BlockingWorker worker_{io_, 2};
  std::string dir_;
};

TEST_F(DiskPoolTest, ATakenDiskIsASparseExt4ImageAndThePoolRefillsBehindIt) {
  DiskPool pool(dir_ + "/pool", 2, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  auto st = Take(pool, 256, "a.img");
  ASSERT_TRUE(st.ok()) << st.error().message;
  struct stat s {};
  ASSERT_EQ(stat((dir_ + "/a.img").c_str(), &s), 0);
  EXPECT_EQ(s.st_size, 256 << 20);
  EXPECT_LT(s.st_blocks * 512, 8 << 20) << "not sparse";
  // ext4 with the inode count the size asks for.
  const std::string out = dir_ + "/dumpe2fs.txt";
  // (A test's own temp paths in a fixed command line.)
  ASSERT_EQ(std::system(  // NOLINT(cert-env33-c)
                ("/sbin/dumpe2fs -h '" + dir_ + "/a.img' > '" + out + "' 2>/dev/null").c_str()),
            0);
  std::string dump;
  {
    FILE* f = fopen(out.c_str(), "re");
    char buf[4096];
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0) dump.append(buf, n);
    if (f) fclose(f);
  }
  EXPECT_NE(dump.find("Inode count:              " + std::to_string(SandboxDiskInodes(256))),
            std::string::npos)
      << dump.substr(0, 2000);
  EXPECT_EQ(dump.find("has_journal"), std::string::npos) << "a journal on a throwaway disk";
  // Two more of that size wait in the pool; the next take is one of them.
  EXPECT_EQ(pool.ready(), 2u);
  EXPECT_EQ(PoolFiles(), 2u);
  ASSERT_TRUE(Take(pool, 256, "b.img").ok());
  EXPECT_TRUE(fs::exists(dir_ + "/b.img"));
  EXPECT_EQ(pool.ready(), 2u);
  // mkfs ran once for the size: every image is a sparse copy of that one.
  EXPECT_EQ(GoldenFiles(), 1u);
  ASSERT_EQ(stat((dir_ + "/b.img").c_str(), &s), 0);
  EXPECT_LT(s.st_blocks * 512, 8 << 20) << "the copy is not sparse";
  EXPECT_EQ(std::system(  // NOLINT(cert-env33-c)
                ("/sbin/e2fsck -fn '" + dir_ + "/b.img' >/dev/null 2>&1").c_str()),
            0)
      << "the copy is not a clean ext4 file system";
}

TEST_F(DiskPoolTest, OnlyTheFourSizesMostRecentlyTakenAreKeptWarm) {
  DiskPool pool(dir_ + "/pool", 1, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  for (int mb : {16, 32, 48, 64, 80}) ASSERT_TRUE(Take(pool, mb, std::to_string(mb)).ok());
  EXPECT_EQ(pool.ready(), 4u);
  EXPECT_EQ(PoolFiles(), 4u);
  EXPECT_EQ(SandboxDiskInodes(16), 16384);
  EXPECT_EQ(SandboxDiskInodes(2048), 262144);
}

TEST_F(DiskPoolTest, ResetRemovesWhatAnEarlierRunLeft) {
  fs::create_directories(dir_ + "/pool");
  FILE* f = fopen((dir_ + "/pool/16M-1.img").c_str(), "we");
  ASSERT_NE(f, nullptr);
  fclose(f);
  DiskPool pool(dir_ + "/pool", 0, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  EXPECT_EQ(PoolFiles(), 0u);
  // Without a pool every disk is made at its take.
  ASSERT_TRUE(Take(pool, 16, "c.img").ok());
  EXPECT_TRUE(fs::exists(dir_ + "/c.img"));
  EXPECT_EQ(PoolFiles(), 0u);
}

// Takes `n` disks of `mb` at once (as a burst of creates does), then lets
// the refill run to its end; how many were taken.
int TakeConcurrently(boost::asio::io_context& io, DiskPool& pool, const std::string& dir, int mb,
                     int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    boost::asio::co_spawn(
        io,
        [&pool, &ok, mb,
         path = dir + "/burst-" + std::to_string(i)]() -> boost::asio::awaitable<void> {
          auto d = co_await pool.Take(mb, path);
          ok += d.ok();
        },
        boost::asio::detached);
  }
  io.restart();
  io.run();
  return ok;
}

TEST_F(DiskPoolTest, ConcurrentTakesOfANewSizeWaitForOneMkfs) {
  DiskPool pool(dir_ + "/pool", 1, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  EXPECT_EQ(TakeConcurrently(io_, pool, dir_, 48, 6), 6);
  // One golden image, formatted once; every disk is a copy of it.
  EXPECT_EQ(pool.formats(), 1);
  EXPECT_EQ(GoldenFiles(), 1u);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(
        std::system(  // NOLINT(cert-env33-c)
            ("/sbin/e2fsck -fn '" + dir_ + "/burst-" + std::to_string(i) + "' >/dev/null 2>&1")
                .c_str()),
        0)
        << i;
}

TEST_F(DiskPoolTest, AWarmedSizeIsReadyBeforeAnyTake) {
  DiskPool pool(dir_ + "/pool", 2, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  pool.Warm(io_.get_executor(), 64, 5);
  io_.run();
  EXPECT_EQ(pool.ready(), 5u);
  EXPECT_EQ(PoolFiles(), 5u);
  EXPECT_EQ(pool.formats(), 1);
  // The first take is served from it: nothing formatted, nothing copied
  // on its path (the pool refills behind it).
  ASSERT_TRUE(Take(pool, 64, "first.img").ok());
  EXPECT_EQ(pool.formats(), 1);
  EXPECT_EQ(pool.ready(), 5u);
  // Other sizes come and go (four at most) without pushing it out.
  for (int mb : {16, 24, 32, 40, 48}) ASSERT_TRUE(Take(pool, mb, std::to_string(mb)).ok());
  ASSERT_TRUE(Take(pool, 64, "second.img").ok());
  EXPECT_EQ(pool.formats(), 6);         // the five others' golden images, not 64's again
  EXPECT_EQ(pool.ready(), 5u + 3 * 2);  // 64's five, and three other sizes' two
}

TEST_F(DiskPoolTest, ThePoolGrowsWithTheTakesOfABurstUpToEightTimesItsSize) {
  DiskPool pool(dir_ + "/pool", 1, worker_, hutch::jail::DiskPrep{});
  ASSERT_TRUE(pool.Reset().ok());
  // Five takes at once drain a pool of one; the refill then keeps five
  // ready for the next burst (they came within the demand window).
  EXPECT_EQ(TakeConcurrently(io_, pool, dir_, 32, 5), 5);
  EXPECT_EQ(pool.ready(), 5u);
  EXPECT_EQ(PoolFiles(), 5u);
  // More than eight times the pool's size: it stops at eight.
  fs::create_directories(dir_ + "/second");
  EXPECT_EQ(TakeConcurrently(io_, pool, dir_ + "/second", 32, 12), 12);
  EXPECT_EQ(pool.ready(), 8u);
  // Another size's demand is its own: one take, one kept.
  ASSERT_TRUE(Take(pool, 16, "other.img").ok());
  EXPECT_EQ(pool.ready(), 9u);
}

// The loop device a taken disk comes attached to: what backs it, per sysfs.
std::string BackingFile(const std::string& dev) {
  std::ifstream in("/sys/block/" + dev.substr(dev.rfind('/') + 1) + "/loop/backing_file");
  std::string b;
  std::getline(in, b);
  return b;
}

TEST_F(DiskPoolTest, APreparingPoolHandsOutMountedDisksAndLeavesNothingWhenItGoes) {
  if (geteuid() != 0) GTEST_SKIP() << "attaching loop devices and mounting need root";
  std::vector<std::string> pooled;
  {
    DiskPool pool(dir_ + "/pool", 1, worker_, hutch::jail::DiskPrep{true, 4242});
    ASSERT_TRUE(pool.Reset().ok());
    // The first take makes its disk; the second is the one the refill
    // prepared ahead, its loop device following it to its new name.
    for (const char* name : {"a.img", "b.img"}) {
      auto d = TakeDisk(pool, 64, name);
      ASSERT_TRUE(d.ok()) << d.error().message;
      ASSERT_TRUE(d->loop.fd.valid());
      EXPECT_EQ(BackingFile(d->loop.path), dir_ + "/" + name) << d->loop.path;
      // A mounted ext4 with the overlay's directories, upper owned by the
      // sandbox's root.
      ASSERT_TRUE(d->mount.valid());
      struct statfs fs {};
      ASSERT_EQ(fstatfs(d->mount.get(), &fs), 0);
      EXPECT_EQ(fs.f_type, 0xEF53u) << "not ext4";
      struct stat st {};
      ASSERT_EQ(fstatat(d->mount.get(), "upper", &st, 0), 0);
      EXPECT_EQ(st.st_uid, 4242u);
      ASSERT_EQ(fstatat(d->mount.get(), "work", &st, 0), 0);
      EXPECT_EQ(st.st_mode & 07777, 0700u);
    }
    // What waits in the pool is attached too (two: the two takes made
    // the demand two).
    for (const auto& l : hutch::LoopDevicesBackedUnder(dir_ + "/pool/")) pooled.push_back(l.device);
    EXPECT_EQ(pooled.size(), 2u);
    EXPECT_EQ(pool.ready(), 2u);
    // The taken disks' fds closed at the end of each iteration: nothing
    // else held their mounts, so they are unmounted and detached already.
    EXPECT_TRUE(hutch::LoopDevicesBackedUnder(dir_ + "/a.img").empty());
    EXPECT_TRUE(hutch::LoopDevicesBackedUnder(dir_ + "/b.img").empty());
  }
  // A pool that goes (or a hutchd that crashes) leaves nothing attached.
  EXPECT_TRUE(hutch::LoopDevicesBackedUnder(dir_).empty());
}

}  // namespace
