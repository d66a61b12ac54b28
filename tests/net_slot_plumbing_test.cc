// A network slot's kernel objects made and removed from hutchd's own code
// (net/slot_plumbing.h, net/named_netns.h, net/rtnetlink.h): a named
// namespace bound in a directory, a veth pair whose peer is born inside
// it, both ends configured; and removal that leaves no bind mount, no file
// and no interface. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN).
//
// Touches nothing of the host's network: the "host" side is a namespace
// the test makes, and the namespaces directory is a temp dir that the test
// unmounts at the end.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/netns_socket.h"
#include "net/named_netns.h"
#include "net/rtnetlink.h"
#include "net/slot_plumbing.h"
#include "tests/support/mount_points.h"

namespace hutch::net {
namespace {

namespace fs = std::filesystem;

// Mount points under `dir` in this process's mount table.
int MountsUnder(const std::string& dir) {
  return static_cast<int>(hutch::testing::MountPointsUnder(dir + "/").size());
}

class SlotPlumbingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    char tmpl[] = "/tmp/hutch-netns-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto st = PrepareNetnsDir(dir_);
    ASSERT_TRUE(st.ok()) << st.error().message;
    // The stand-in for the host's namespace.
    auto host = CreateNamedNetns(dir_, "host");
    ASSERT_TRUE(host.ok()) << host.error().message;
    host_ns_ = std::move(host).value();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    host_ns_.reset();
    (void)RemoveNamedNetns(dir_, "host");
    umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A slot named "slot" in dir_: gateway 10.99.0.1, sandbox 10.99.0.2.
  SlotPlumbing Plan(const std::string& host_if) const {
    SlotPlumbing p;
    p.netns_dir = dir_;
    p.netns_name = "slot";
    p.host_if = host_if;
    p.gateway = 0x0a630001;
    p.address = 0x0a630002;
    return p;
  }

  std::string dir_;
  UniqueFd host_ns_;
};

TEST_F(SlotPlumbingTest, NamedNetnsIsANewBoundNamespaceAndGoesWithoutTrace) {
  auto ns = CreateNamedNetns(dir_, "a");
  ASSERT_TRUE(ns.ok()) << ns.error().message;
  EXPECT_EQ(ioctl(ns->get(), NS_GET_NSTYPE), CLONE_NEWNET);
  struct stat mine {
  }, made{};
  ASSERT_EQ(stat("/proc/self/ns/net", &mine), 0);
  ASSERT_EQ(fstat(ns->get(), &made), 0);
  EXPECT_NE(mine.st_ino, made.st_ino) << "a new namespace, not the caller's";
  EXPECT_EQ(MountsUnder(dir_), 2);  // "host" and "a"

  auto again = CreateNamedNetns(dir_, "a");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().err, EEXIST);
  EXPECT_EQ(MountsUnder(dir_), 2) << "a taken name is left as it was";

  ASSERT_TRUE(RemoveNamedNetns(dir_, "a").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/a"));
  EXPECT_EQ(MountsUnder(dir_), 1);
  EXPECT_TRUE(RemoveNamedNetns(dir_, "a").ok()) << "removing a missing one is not an error";
}

TEST_F(SlotPlumbingTest, BuiltSlotConnectsBothEndsAndTearDownRemovesEverything) {
  auto host = RtNetlink::OpenIn(host_ns_.get());
  ASSERT_TRUE(host.ok()) << host.error().message;
  SlotPlumbing p = Plan("tstv0");
  auto st = BuildSlot(*host, p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(host->LinkIndex("tstv0").ok());
  EXPECT_FALSE(host->LinkIndex("eth0").ok()) << "the peer is born inside the slot's namespace";

  // A listener on the host's end, a connection from inside the slot: both
  // addresses, both links up, the route.
  UniqueFd slot_ns(open((dir_ + "/slot").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(slot_ns);
  auto srv = TcpSocketInNetns(host_ns_.get());
  ASSERT_TRUE(srv.ok()) << srv.error().message;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(p.gateway);
  a.sin_port = htons(4321);
  ASSERT_EQ(bind(srv->get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
  ASSERT_EQ(listen(srv->get(), 1), 0);
  auto cli = TcpSocketInNetns(slot_ns.get());
  ASSERT_TRUE(cli.ok()) << cli.error().message;
  int rc = connect(cli->get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << strerror(errno);
  pollfd pf{cli->get(), POLLOUT, 0};
  ASSERT_EQ(poll(&pf, 1, 5000), 1);
  int err = -1;
  socklen_t len = sizeof(err);
  getsockopt(cli->get(), SOL_SOCKET, SO_ERROR, &err, &len);
  EXPECT_EQ(err, 0) << strerror(err);
  cli->reset();

  // A second build of the same slot fails and leaves the first intact.
  EXPECT_FALSE(BuildSlot(*host, p).ok());
  EXPECT_TRUE(host->LinkIndex("tstv0").ok());
  EXPECT_TRUE(fs::exists(dir_ + "/slot"));

  // Removal: even while something still holds the namespace (slot_ns, as
  // a sandbox's process would), the host's end, the name and the mount go.
  ASSERT_TRUE(TearDownSlot(*host, p).ok());
  EXPECT_FALSE(host->LinkIndex("tstv0").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/slot"));
  EXPECT_EQ(MountsUnder(dir_), 1);  // only "host"
  EXPECT_TRUE(TearDownSlot(*host, p).ok()) << "what is gone already is skipped";
}

TEST_F(SlotPlumbingTest, FailedBuildLeavesNothingBehind) {
  auto host = RtNetlink::OpenIn(host_ns_.get());
  ASSERT_TRUE(host.ok()) << host.error().message;
  SlotPlumbing p = Plan("this-name-is-too-long-for-an-interface");
  EXPECT_FALSE(BuildSlot(*host, p).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/slot"));
  EXPECT_EQ(MountsUnder(dir_), 1);
}

}  // namespace
}  // namespace hutch::net
