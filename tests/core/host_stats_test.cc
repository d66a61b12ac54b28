// HostStatsReader over a directory shaped like /proc: the figures
// admission decides on, PSI optional, every other file required.
#include "common/host_stats.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace hutch::testing {
namespace {

namespace fs = std::filesystem;

class HostStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-host-stats-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
    Write("meminfo",
          "MemTotal:       24683664 kB\nMemFree:         1000000 kB\n"
          "MemAvailable:   22174164 kB\nBuffers:           1000 kB\n");
    Write("pressure/memory",
          "some avg10=0.08 avg60=0.48 avg300=0.20 total=11205355\n"
          "full avg10=12.50 avg60=0.19 avg300=0.07 total=4270753\n");
    Write("loadavg", "5.37 4.07 3.47 6/122 22363\n");
    Write("sys/kernel/pid_max", "32768\n");
    Write("sys/kernel/threads-max", "192724\n");
    Write("sys/fs/file-nr", "765\t0\t2466093\n");
    Write("sys/fs/file-max", "2466093\n");
  }
  void TearDown() override { fs::remove_all(root); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root + "/" + rel).parent_path());
    std::ofstream(root + "/" + rel) << text;
  }
  std::string root;
};

TEST_F(HostStatsTest, ReadsEveryFigure) {
  auto st = HostStatsReader(root).Read();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->mem_total_mb, 24683664 / 1024);
  EXPECT_EQ(st->mem_available_mb, 22174164 / 1024);
  ASSERT_TRUE(st->memory_full_avg10.has_value());
  EXPECT_DOUBLE_EQ(*st->memory_full_avg10, 12.5);
  EXPECT_EQ(st->tasks, 122);
  EXPECT_EQ(st->task_limit, 32768);  // the lower of pid_max and threads-max
  EXPECT_EQ(st->files_open, 765);
  EXPECT_EQ(st->files_max, 2466093);
}

TEST_F(HostStatsTest, AKernelWithoutPsiHasNoPressureFigure) {
  fs::remove_all(root + "/pressure");
  auto st = HostStatsReader(root).Read();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(st->memory_full_avg10.has_value());
}

TEST_F(HostStatsTest, AMissingOrMalformedFileIsAnErrorNamingIt) {
  Write("meminfo", "MemTotal: 1000 kB\n");  // no MemAvailable
  auto st = HostStatsReader(root).Read();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("meminfo"), std::string::npos) << st.error().message;
  Write("meminfo", "MemTotal: 1000 kB\nMemAvailable: 500 kB\n");
  ASSERT_TRUE(HostStatsReader(root).Read().ok());
  fs::remove(root + "/sys/fs/file-max");
  st = HostStatsReader(root).Read();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("file-max"), std::string::npos) << st.error().message;
}

TEST(HostStatsLive, ThisHostIsReadable) {
  auto st = HostStatsReader().Read();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_GT(st->mem_total_mb, 0);
  EXPECT_GT(st->mem_available_mb, 0);
  EXPECT_GT(st->tasks, 0);
  EXPECT_GT(st->task_limit, st->tasks);
  EXPECT_GT(st->files_max, 0);
}

}  // namespace
}  // namespace hutch::testing
