// Host-side views of one sandbox, for tests that must prove what a sandbox
// holds on the host (processes, cgroups, mounts, its directory) and that
// nothing of it is left after delete, shutdown or a crash and restart.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing::probe {

constexpr uid_t kUidBase = 1000000;  // hutchd's default --uid-base

std::string ReadFile(const std::string& path);

struct HostProc {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string name;
  std::string start;  // field 22 of /proc/<pid>/stat: tells pid reuse apart
};

std::string StartTime(pid_t pid);
// Every host process whose cgroup path names the sandbox.
std::vector<HostProc> ProcsOf(const std::string& id);
bool StillRunning(const HostProc& p);
std::vector<std::string> CgroupDirsOf(const std::string& id);
// Mounts that mention the sandbox in any mount namespace on the host (an
// overlay lists its upper/work dirs, which carry the id).
std::vector<std::string> MountsOf(const std::string& id);

// Loop devices whose backing file is in the sandbox's directory (a jail
// sandbox's disk), deleted or not: "/dev/loopN: <backing file>".
std::vector<std::string> LoopsOf(const std::string& id);

struct Footprint {
  std::vector<HostProc> procs;
  std::vector<std::string> cgroups;
  std::vector<std::string> mounts;
  std::vector<std::string> loops;
  bool dir = false;
  // A vm sandbox: its dir is <state>/vm/sandboxes/<id>, its one host
  // process is QEMU (as the vm user), and it has no host mounts.
  bool vm = false;
};

// The sandbox's directory on the host: the jail driver's, or the vm
// driver's when that one exists.
std::string SandboxDirOf(const TestServer& s, const std::string& id);

Footprint FootprintOf(const TestServer& s, const std::string& id);
// The positive control: a live sandbox is visible to every probe above, so
// their silence after deletion means something.
void ExpectLiveFootprint(const Footprint& f, const std::string& id, size_t min_procs);
void ExpectNothingLeft(const TestServer& s, const std::string& id, const Footprint& before);

// This server's cgroup name prefix, from its start line ("tag=h1234abcd").
std::string TagOf(const TestServer& s);
// Sandbox ids that have a cgroup of this server (by tag) on the host.
std::set<std::string> CgroupIdsOf(const std::string& tag);
// Sandbox ids whose disk (a loop device backed by a file in a jail
// sandbox's directory of this server) is attached on the host.
std::set<std::string> LoopIdsOf(const TestServer& s);
// LoopIdsOf once it equals `expected`, or after 5 s what it is then: a
// deleted jail sandbox's disk is detached just after the delete is
// answered (by hutchd's kernel worker).
std::set<std::string> SettledLoopIdsOf(const TestServer& s, const std::set<std::string>& expected);
// Sandbox ids that have a directory in the server's state dir (either
// driver's).
std::set<std::string> SandboxDirs(const TestServer& s);

}  // namespace hutch::testing::probe
