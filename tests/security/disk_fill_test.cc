// Issue 32, finding 8: the writable layer was a tmpfs, whose pages count
// toward the sandbox's memory cgroup and cannot be reclaimed, so writing
// past `memory_mb` OOM-killed the agent (PID 1: the sandbox turned
// `failed`) long before the disk quota; and the agent's own
// `oom_score_adj` was silently refused. Now the writable layer is an ext4
// file system on a sparse image (its page cache is reclaimable), and hutchd
// shields the agent from the OOM killer from the host. The sandbox's
// workload may do anything to its memory and disk: the agent answers after,
// a full disk is ENOSPC at `disk_mb`, and `memory_mb` stays the memory
// limit.
//
// With the vm driver (HUTCH_TEST_DRIVER=vm) the guest has its own disk of
// `disk_mb` and its own kernel, where the agent is PID 1 (init, never an
// OOM victim): the same outcome is asserted.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/host_probe.h"
#include "tests/support/shared_server.h"

using hutch::testing::OnVm;
using hutch::testing::StderrOf;
using hutch::testing::StdoutOf;
using nlohmann::json;

namespace {

constexpr int64_t kMemoryMb = 128;
constexpr int64_t kDiskMb = 512;

class DiskFill : public hutch::testing::SharedServerTest {
 protected:
  static std::string StatusOf(const std::string& id) {
    auto r = server().Client().Request("GET", "/v1/sandboxes/" + id);
    return r.json().is_object() ? r.json().value("status", "") : r.body;
  }
  // A sandbox whose disk is four times its memory.
  static std::string SmallMemoryBigDisk() {
    return server().CreateSandbox(
        {{"memory_mb", kMemoryMb}, {"disk_mb", kDiskMb}, {"ttl_seconds", 900}});
  }
  // The agent still runs commands and the sandbox is not failed.
  static void ExpectServing(const std::string& id, const std::string& when) {
    auto r = server().Exec(id, "echo alive", 60);
    EXPECT_EQ(StdoutOf(r), "alive\n") << when << ": " << r.dump();
    EXPECT_EQ(StatusOf(id), "running") << when;
    auto ls = server().Client().Request("GET", "/v1/sandboxes/" + id + "/fs/list?path=/");
    EXPECT_EQ(ls.status, 200) << when << ": " << ls.body.substr(0, 300);
  }
  // Bytes of a file in the sandbox (-1 when stat fails).
  static int64_t SizeOf(const std::string& id, const std::string& path) {
    const std::string out = StdoutOf(server().Exec(id, "stat -c %s " + path));
    return out.empty() ? -1 : std::stoll(out);
  }
};

// dd until the disk is full: ENOSPC near disk_mb, far past memory_mb.
TEST_F(DiskFill, FillingTheDiskPastTheMemoryLimitEndsInEnospcAndTheAgentLives) {
  const std::string id = SmallMemoryBigDisk();
  ASSERT_FALSE(id.empty());
  auto r = server().Exec(id, "dd if=/dev/zero of=/big bs=1M", 300);
  std::cout << "dd: " << StderrOf(r);
  EXPECT_EQ(r["_status"], 200) << r.dump();
  EXPECT_NE(r.value("exit_code", 0), 0) << r.dump();
  EXPECT_EQ(r.value("oom_killed", true), false) << r.dump();
  EXPECT_NE(StderrOf(r).find("No space left on device"), std::string::npos) << r.dump();
  ExpectServing(id, "after the disk fill");
  // The documented size is usable: far more than memory_mb went in, and
  // no more than disk_mb.
  const int64_t size = SizeOf(id, "/big");
  std::cout << "filled " << (size >> 20) << " MiB of a " << kDiskMb << " MiB disk with "
            << kMemoryMb << " MiB of memory\n";
  EXPECT_GT(size, (kDiskMb * 3 / 4) << 20);
  EXPECT_LE(size, kDiskMb << 20);
  // The stats say the same.
  auto stats = server().Client().Request("GET", "/v1/sandboxes/" + id + "/metrics").json();
  std::cout << "stats: " << stats.dump() << "\n";
  EXPECT_GE(stats.value("disk_limit_bytes", 0ull), static_cast<uint64_t>(kDiskMb * 3 / 4) << 20);
  EXPECT_LE(stats.value("disk_limit_bytes", 0ull), static_cast<uint64_t>(kDiskMb) << 20);
  EXPECT_GE(stats.value("disk_used_bytes", 0ull), static_cast<uint64_t>(size) / 10 * 9);
  // Freeing space makes the disk usable again.
  r = server().Exec(id, "rm /big && echo hello > /after && cat /after");
  EXPECT_EQ(StdoutOf(r), "hello\n") << r.dump();
  server().Client().Request("DELETE", "/v1/sandboxes/" + id);
}

// A memory balloon while the disk fills, twice (the second time on a full
// disk): the balloon is OOM-killed, the disk fill ends in ENOSPC, the agent
// is never the victim.
TEST_F(DiskFill, AMemoryBalloonAndADiskFillTogetherLeaveTheAgentServing) {
  const std::string id = SmallMemoryBigDisk();
  ASSERT_FALSE(id.empty());
  const std::string balloon =
      "b = []\nwhile True: b.append(bytearray(16 << 20)); b[-1][::4096] = b'x' * 4096";
  for (int round = 1; round <= 2; ++round) {
    const std::string tag = "round " + std::to_string(round);
    auto r = server().Client().Json(
        "POST", "/v1/sandboxes/" + id + "/exec",
        {{"argv",
          {"sh", "-c",
           "dd if=/dev/zero of=/fill" + std::to_string(round) +
               " bs=1M 2>/tmp/dd.err & python3 -c \"$0\"; echo balloon=$?; wait; cat /tmp/dd.err",
           balloon}},
         {"timeout_seconds", 300}});
    std::cout << tag << ": " << r.body.substr(0, 600) << "\n";
    EXPECT_EQ(r.status, 200) << tag << ": " << r.body.substr(0, 600);
    const json j = r.json();
    const std::string out = StdoutOf(j);
    EXPECT_NE(out.find("balloon=137"), std::string::npos) << tag << ": " << j.dump();
    // In a 128 MB guest, whose kernel shares that RAM with the balloon and
    // the page cache, the guest's OOM killer may take dd as well.
    if (!OnVm()) {
      EXPECT_NE(out.find("No space left on device"), std::string::npos) << tag << ": " << j.dump();
    }
    ExpectServing(id, tag);
  }
  // The memory limit is still memory_mb: the disk took none of it. (A
  // guest's memory_mb holds its kernel too.)
  auto r = server().Exec(id,
                         "python3 -c \"b = bytearray(" +
                             std::to_string(OnVm() ? kMemoryMb / 4 : kMemoryMb / 2) +
                             " << 20); b[::4096] = b'x' * len(b[::4096]); print('ok')\"",
                         60);
  EXPECT_EQ(StdoutOf(r), "ok\n") << r.dump();
  server().Client().Request("DELETE", "/v1/sandboxes/" + id);
}

// The agent itself writes an upload: past memory_mb it is written whole,
// past disk_mb it is refused with no_space; the agent answers after both.
TEST_F(DiskFill, UploadsPastTheMemoryLimitAreWrittenAndPastTheDiskRefused) {
  const std::string id = SmallMemoryBigDisk();
  ASSERT_FALSE(id.empty());
  auto c = server().Client();
  auto zeros = [](char* buf, size_t max) {
    std::memset(buf, 'z', max);
    return max;
  };
  const uint64_t fits = static_cast<uint64_t>(kMemoryMb * 2) << 20;
  auto up = c.Upload("/v1/sandboxes/" + id + "/fs?path=/up1", fits, zeros);
  EXPECT_EQ(up.status, 201) << up.body.substr(0, 300);
  ExpectServing(id, "after an upload of twice memory_mb");
  EXPECT_EQ(SizeOf(id, "/up1"), static_cast<int64_t>(fits));
  // More than the room left.
  auto over = c.Upload("/v1/sandboxes/" + id + "/fs?path=/up2",
                       static_cast<uint64_t>(kDiskMb - kMemoryMb * 2 + 64) << 20, zeros);
  EXPECT_EQ(over.status, 422) << over.body.substr(0, 300);
  EXPECT_EQ(over.json().value("code", ""), "no_space") << over.body.substr(0, 300);
  ExpectServing(id, "after an upload past disk_mb");
  server().Client().Request("DELETE", "/v1/sandboxes/" + id);
}

// The OOM killer's view from inside: the agent (PID 1) is shielded, a
// command starts well above it and cannot lower itself below it. The
// agent is at -999 where the host lets root lower a score
// (CAP_SYS_RESOURCE), else at 0 with its commands at 500.
TEST_F(DiskFill, TheAgentIsShieldedFromTheOomKillerAndItsCommandsAreNot) {
  if (OnVm()) GTEST_SKIP() << "in a guest the agent is init, which the OOM killer never picks";
  auto r = Exec("cat /proc/1/oom_score_adj /proc/self/oom_score_adj");
  std::istringstream in(StdoutOf(r));
  int agent = 1000, command = -1000;
  ASSERT_TRUE(in >> agent >> command) << r.dump();
  std::cout << "oom_score_adj: agent " << agent << ", a command " << command << "\n";
  EXPECT_TRUE(agent == -999 || agent == 0) << r.dump();
  EXPECT_GE(command - agent, 500) << r.dump();
  EXPECT_GE(command, 0) << r.dump();
  r = Exec("echo " + std::to_string(agent - 1) + " > /proc/self/oom_score_adj || echo refused");
  EXPECT_NE(StdoutOf(r).find("refused"), std::string::npos) << r.dump();
}

// The disk is the sandbox's: it survives a crash and restart of hutchd
// with its sandbox (adopted, files intact, the same device), and goes with
// it — also when the sandbox died while no hutchd was running.
TEST(SandboxDisk, OutlivesACrashOfTheServerWithItsSandboxAndGoesWithIt) {
  using namespace hutch::testing::probe;
  if (OnVm()) GTEST_SKIP() << "a vm sandbox's disk is QEMU's (vm_lifecycle_slow_test)";
  hutch::testing::TestServer s;
  ASSERT_TRUE(s.ok());
  const std::string kept = s.CreateSandbox({{"ttl_seconds", 600}});
  const std::string lost = s.CreateSandbox({{"ttl_seconds", 600}});
  ASSERT_EQ(StdoutOf(s.Exec(kept, "echo data > /kept.txt && cat /kept.txt")), "data\n");
  const Footprint kept_fp = FootprintOf(s, kept), lost_fp = FootprintOf(s, lost);
  ExpectLiveFootprint(kept_fp, kept, 1);
  ExpectLiveFootprint(lost_fp, lost, 1);
  EXPECT_EQ(LoopIdsOf(s), (std::set<std::string>{kept, lost}));

  s.Kill9();
  // `lost` dies while no server runs: its disk must not outlive it.
  for (const auto& p : lost_fp.procs) kill(p.pid, SIGKILL);
  // And a disk whose sandbox is unknown, still attached (what a crash at
  // the wrong moment could leave, without auto-clear): reconcile detaches it.
  const std::string stray = s.state_dir() + "/state/sandboxes/sb_stray";
  hutch::testing::HostSh("mkdir -p " + stray + " && truncate -s 16M " + stray +
                         "/disk.img && losetup -f " + stray + "/disk.img");
  ASSERT_EQ(LoopsOf("sb_stray").size(), 1u);
  s.Restart();
  ASSERT_TRUE(s.ok()) << s.Log();

  EXPECT_EQ(StdoutOf(s.Exec(kept, "cat /kept.txt")), "data\n");
  EXPECT_EQ(LoopsOf(kept), kept_fp.loops) << "the disk was not the one it had";
  EXPECT_EQ(s.Client().Request("GET", "/v1/sandboxes/" + lost).json().value("status", ""),
            "failed");
  ExpectNothingLeft(s, lost, lost_fp);
  EXPECT_TRUE(LoopsOf("sb_stray").empty());
  EXPECT_FALSE(std::filesystem::exists(stray));
  EXPECT_EQ(SettledLoopIdsOf(s, {kept}), std::set<std::string>{kept});
  ASSERT_EQ(s.Client().Request("DELETE", "/v1/sandboxes/" + kept).status, 204);
  ExpectNothingLeft(s, kept, kept_fp);
  EXPECT_TRUE(SettledLoopIdsOf(s, {}).empty());
}

}  // namespace
