#include "tests/support/host_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace hutch::testing::probe {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string StartTime(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t p = stat.rfind(')');
  if (p == std::string::npos) return "";
  std::istringstream in(stat.substr(p + 2));
  std::string f;
  for (int i = 3; i <= 22 && in >> f; ++i) {
  }
  return f;
}

// Every host process whose cgroup path names the sandbox.
std::vector<HostProc> ProcsOf(const std::string& id) {
  std::vector<HostProc> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFile(e.path().string() + "/cgroup").find(id) == std::string::npos) continue;
    HostProc p;
    p.pid = std::stoi(n);
    std::istringstream st(ReadFile(e.path().string() + "/status"));
    std::string line;
    while (std::getline(st, line)) {
      if (line.rfind("Uid:", 0) == 0) p.uid = static_cast<uid_t>(std::stoul(line.substr(4)));
      if (line.rfind("Name:", 0) == 0) p.name = line.substr(6);
    }
    p.start = StartTime(p.pid);
    out.push_back(p);
  }
  return out;
}

bool StillRunning(const HostProc& p) {
  // A zombie (state Z) holds nothing but its pid until its parent reaps
  // it; an adopted agent's parent is the host's init, which reaps on its
  // own schedule.
  std::string stat = ReadFile("/proc/" + std::to_string(p.pid) + "/stat");
  size_t close = stat.rfind(')');
  if (stat.empty() || close == std::string::npos || close + 2 >= stat.size()) return false;
  return stat[close + 2] != 'Z' && StartTime(p.pid) == p.start;
}

std::vector<std::string> CgroupDirsOf(const std::string& id) {
  std::vector<std::string> out;
  std::istringstream in(
      HostSh("find /sys/fs/cgroup -maxdepth 8 -type d -name '*" + id + "*' 2>/dev/null"));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

// Mounts that mention the sandbox in any mount namespace on the host (an
// overlay lists its upper/work dirs, which carry the id).
std::vector<std::string> MountsOf(const std::string& id) {
  std::vector<std::string> out;
  std::set<std::string> seen_ns;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code lec;
    std::string ns = fs::read_symlink(e.path() / "ns" / "mnt", lec).string();
    if (lec || !seen_ns.insert(ns).second) continue;
    std::istringstream in(ReadFile(e.path().string() + "/mountinfo"));
    std::string line;
    while (std::getline(in, line))
      if (line.find(id) != std::string::npos) out.push_back("pid " + n + " (" + ns + "): " + line);
  }
  std::istringstream self(ReadFile("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(self, line))
    if (line.find(id) != std::string::npos) out.push_back("self: " + line);
  return out;
}

std::vector<std::string> LoopsOf(const std::string& id) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/sys/block", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("loop", 0) != 0) continue;
    std::string backing = ReadFile(e.path().string() + "/loop/backing_file");
    if (backing.find("/sandboxes/" + id + "/") != std::string::npos)
      out.push_back("/dev/" + n + ": " + backing);
  }
  return out;
}

std::set<std::string> LoopIdsOf(const TestServer& s) {
  std::set<std::string> ids;
  const std::string prefix = fs::weakly_canonical(s.state_dir()).string() + "/state/sandboxes/";
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/sys/block", ec)) {
    if (e.path().filename().string().rfind("loop", 0) != 0) continue;
    const std::string backing = ReadFile(e.path().string() + "/loop/backing_file");
    if (backing.rfind(prefix, 0) != 0) continue;
    ids.insert(backing.substr(prefix.size(), backing.find('/', prefix.size()) - prefix.size()));
  }
  return ids;
}

std::set<std::string> SettledLoopIdsOf(const TestServer& s, const std::set<std::string>& expected) {
  std::set<std::string> ids = LoopIdsOf(s);
  for (int i = 0; i < 100 && ids != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ids = LoopIdsOf(s);
  }
  return ids;
}

std::string SandboxDirOf(const TestServer& s, const std::string& id) {
  const std::string vm = s.state_dir() + "/state/vm/sandboxes/" + id;
  return fs::exists(vm) ? vm : s.state_dir() + "/state/sandboxes/" + id;
}

Footprint FootprintOf(const TestServer& s, const std::string& id) {
  Footprint f;
  f.procs = ProcsOf(id);
  f.cgroups = CgroupDirsOf(id);
  f.mounts = MountsOf(id);
  f.loops = LoopsOf(id);
  f.vm = fs::exists(s.state_dir() + "/state/vm/sandboxes/" + id);
  f.dir = fs::exists(SandboxDirOf(s, id));
  return f;
}

// The positive control: a live sandbox is visible to every probe above, so
// their silence after deletion means something.
void ExpectLiveFootprint(const Footprint& f, const std::string& id, size_t min_procs) {
  EXPECT_GE(f.procs.size(), min_procs) << id;
  for (const auto& p : f.procs) {
    if (f.vm) {
      // QEMU, confined as the unprivileged vm user (never root).
      EXPECT_NE(p.uid, 0u) << id << ": pid " << p.pid << " (" << p.name << ") runs as root";
    } else {
      EXPECT_TRUE(p.uid >= kUidBase && p.uid < kUidBase + 65536)
          << id << ": pid " << p.pid << " (" << p.name << ") runs as host uid " << p.uid;
    }
  }
  EXPECT_FALSE(f.cgroups.empty()) << id;
  // A VM's mounts are the guest kernel's; the host holds none for it.
  if (!f.vm) {
    EXPECT_FALSE(f.mounts.empty()) << id;
    // The jail's writable layer: its disk's loop device.
    EXPECT_EQ(f.loops.size(), 1u) << id;
  }
  EXPECT_TRUE(f.dir) << id;
}

void ExpectNothingLeft(const TestServer& s, const std::string& id, const Footprint& before) {
  for (const auto& p : before.procs)
    EXPECT_FALSE(StillRunning(p)) << id << ": pid " << p.pid << " (" << p.name << ") survived";
  for (const auto& p : ProcsOf(id))
    ADD_FAILURE() << id << ": process left in its cgroup: " << p.pid << " " << p.name;
  for (const auto& d : CgroupDirsOf(id)) ADD_FAILURE() << id << ": cgroup left: " << d;
  for (const auto& m : MountsOf(id)) ADD_FAILURE() << id << ": mount left: " << m;
  // A jail disk's file system is unmounted, and its loop device detached,
  // by hutchd's kernel worker just after the delete is answered (the
  // delete does not wait for that teardown): give it a few seconds.
  for (int i = 0; i < 100 && !LoopsOf(id).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (const auto& l : LoopsOf(id)) ADD_FAILURE() << id << ": loop device left: " << l;
  EXPECT_FALSE(fs::exists(s.state_dir() + "/state/sandboxes/" + id)) << id << ": sandbox dir left";
  EXPECT_FALSE(fs::exists(s.state_dir() + "/state/vm/sandboxes/" + id))
      << id << ": vm sandbox dir left";
  EXPECT_FALSE(fs::exists(s.state_dir() + "/state/vm/pids/" + id)) << id << ": vm pid file left";
}

// This server's cgroup name prefix, from its start line ("tag=h1234abcd").
std::string TagOf(const TestServer& s) {
  std::string log = s.Log();
  size_t p = log.rfind(" tag=");
  if (p == std::string::npos) return "";
  size_t e = log.find_first_of(" \n", p + 5);
  return log.substr(p + 5, e - p - 5);
}

// Sandbox ids that have a cgroup of this server on the host.
std::set<std::string> CgroupIdsOf(const std::string& tag) {
  std::set<std::string> ids;
  std::istringstream in(
      HostSh("find /sys/fs/cgroup -maxdepth 8 -type d -name '" + tag + "-*' 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    std::string base = fs::path(line).filename().string();
    ids.insert(base.substr(tag.size() + 1));
  }
  return ids;
}

std::set<std::string> SandboxDirs(const TestServer& s) {
  std::set<std::string> out;
  std::error_code ec;
  for (const char* sub : {"/state/sandboxes", "/state/vm/sandboxes"})
    for (auto& e : fs::directory_iterator(s.state_dir() + sub, ec)) out.insert(e.path().filename());
  return out;
}

}  // namespace hutch::testing::probe
