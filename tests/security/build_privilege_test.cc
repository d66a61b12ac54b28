// Issue 32 #10: template builds with the least privilege they need.
// debootstrap, and the maintainer script of every package it installs, ran
// as the host's root: a compromised or hostile package (or mirror) owned
// the host. It now runs as root of a user namespace mapped onto the
// sandbox uid range, in mount and pid namespaces of its own. A stand-in
// tool in debootstrap's place reports what it may do; before the change
// it wrote /etc and a root-only file of the host, and its uid map was the
// host's whole range.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/debootstrap.h"

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kUidBase = 1'300'000;  // a range no sandbox of a test hutchd uses

struct Dir {
  std::string path;
  explicit Dir(std::string tmpl) { path = mkdtemp(tmpl.data()) ? tmpl : ""; }
  ~Dir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

struct Outcome {
  hutch::Result<int> rc = 0;
  std::string output;
};

// Result<T> has no default state for co_spawn's future; the coroutine
// stores its answer here instead.

Outcome RunTool(const std::string& target, const std::string& tool) {
  boost::asio::io_context io;
  Outcome o;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        o.rc = co_await hutch::RunDebootstrap(
            "bookworm", target, "http://mirror.invalid/debian", kUidBase,
            [&](std::string_view d) -> boost::asio::awaitable<void> {
              o.output.append(d);
              co_return;
            },
            tool);
      },
      boost::asio::detached);
  io.run();
  return o;
}

}  // namespace

TEST(BuildPrivilege, DebootstrapRunsAsRootOfTheSandboxRangeAndNotOfTheHost) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (user namespaces mapped to a uid range)";
  // The tool lives where a user namespace's root may read it (/var/tmp;
  // the tool's /tmp is a tmpfs of its own); the target lies under a
  // directory only the host's root may enter, as hutchd's state dir may.
  Dir tools("/var/tmp/hutch-build-tool-XXXXXX");
  Dir state("/tmp/hutch-build-state-XXXXXX");
  ASSERT_FALSE(tools.path.empty());
  ASSERT_FALSE(state.path.empty());
  ASSERT_EQ(chmod(tools.path.c_str(), 0755), 0);
  ASSERT_EQ(chmod(state.path.c_str(), 0700), 0);
  // The host's files the tool could reach by path: a root-owned file any
  // user may read, a directory only root may enter (both outside /tmp).
  const std::string host_file = tools.path + "/host-file";
  const std::string private_dir = tools.path + "/private";
  ASSERT_EQ(mkdir(private_dir.c_str(), 0700), 0);
  { std::ofstream(host_file) << "host\n"; }
  ASSERT_EQ(chmod(host_file.c_str(), 0644), 0);
  const std::string etc_probe = "/etc/hutch-build-probe-" + std::to_string(getpid());
  const std::string tool = tools.path + "/debootstrap";
  {
    // debootstrap's argv: --variant=minbase --include=... SUITE TARGET MIRROR
    std::ofstream t(tool);
    t << "#!/bin/sh\n"
         "target=\"$4\"\n"
         "echo \"map=$(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')\"\n"
         "echo \"uid=$(id -u)\"\n"
         "echo \"container=$container\"\n"
         "echo data > \"$target/made-by-tool\" && echo wrote-target\n"
         "chown 5:6 \"$target/made-by-tool\" && echo chowned-in-target\n"
         "mkdir \"$target/proc\" && mount -t tmpfs none \"$target/proc\" && echo "
         "mounted-in-target\n"
         "touch "
      << etc_probe
      << " 2>/dev/null && echo WROTE-HOST-ETC\n"
         "echo x 2>/dev/null >> "
      << host_file
      << " && echo WROTE-HOST-FILE\n"
         "cat "
      << host_file
      << " >/dev/null && echo read-host-file\n"
         "ls "
      << private_dir
      << " >/dev/null 2>&1 && echo LISTED-HOST-PRIVATE\n"
         "exit 7\n";
  }
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  const std::string target = state.path + "/rootfs";

  auto o = RunTool(target, tool);
  ASSERT_TRUE(o.rc.ok()) << o.rc.error().message;
  EXPECT_EQ(*o.rc, 7) << o.output;  // the tool's own exit status comes back
  // Root of a namespace whose 65536 ids are the range kUidBase.., nothing more.
  EXPECT_NE(o.output.find("map=0 " + std::to_string(kUidBase) + " 65536\n"), std::string::npos)
      << o.output;
  EXPECT_NE(o.output.find("uid=0\n"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("container=lxc\n"), std::string::npos) << o.output;
  // What a build needs: write, chown and mount in its target.
  EXPECT_NE(o.output.find("wrote-target\n"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("chowned-in-target\n"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("mounted-in-target\n"), std::string::npos) << o.output;
  // What it must not: the host's files.
  EXPECT_EQ(o.output.find("WROTE-HOST-ETC"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("WROTE-HOST-FILE"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("LISTED-HOST-PRIVATE"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("read-host-file\n"), std::string::npos) << o.output;  // the path works
  EXPECT_NE(access(etc_probe.c_str(), F_OK), 0);
  unlink(etc_probe.c_str());
  std::ifstream in(host_file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "host\n");
  // On the host, what it made belongs to the sandbox range; its mount went
  // with its namespace.
  struct stat st {};
  ASSERT_EQ(stat((target + "/made-by-tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidBase + 5);
  EXPECT_EQ(st.st_gid, kUidBase + 6);
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidBase);
  EXPECT_TRUE(fs::is_empty(target + "/proc"));

  // Host ownership shifts into the range once; owners already in it stay.
  { std::ofstream(target + "/added-by-hutchd") << "x"; }
  ASSERT_TRUE(hutch::ShiftRootOwners(target, kUidBase).ok());
  ASSERT_EQ(stat((target + "/made-by-tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidBase + 5);
  ASSERT_EQ(stat((target + "/added-by-hutchd").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidBase);
}

TEST(BuildPrivilege, AToolThatCannotStartSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  Dir state("/tmp/hutch-build-state-XXXXXX");
  ASSERT_FALSE(state.path.empty());
  // A tool the namespace's root may not execute (the host root's 0700 dir).
  const std::string tool = state.path + "/debootstrap";
  { std::ofstream(tool) << "#!/bin/sh\nexit 0\n"; }
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  auto o = RunTool(state.path + "/rootfs", tool);
  ASSERT_TRUE(o.rc.ok()) << o.rc.error().message;
  EXPECT_NE(*o.rc, 0) << o.output;
  EXPECT_FALSE(o.output.empty());
}
