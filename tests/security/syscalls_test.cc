// Design item 2 (security-and-reliability.md): syscalls a hostile workload
// uses to break out must be denied. Each test runs hutch-syscall-probe (a
// static binary built with the tests, copied into the sandbox through the
// files API) as the sandbox's root, the strongest user inside, and asserts
// the precise failure: the seccomp policy (src/driver/jail/seccomp_policy.cc)
// answers EPERM for every denied call, ENOSYS for clone3. Where a call could
// have left a trace (a mount, a device node) the test also proves there is
// none.
#include <errno.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/hostile.h"
#include "tests/support/shared_server.h"

using hutch::testing::StdoutOf;

namespace {

struct ProbeResult {
  long rc = 0;
  int err = -1;
  std::string raw;
};

class Syscall : public hutch::testing::SharedServerTest {
 protected:
  static void SetUpTestSuite() {
    SharedServerTest::SetUpTestSuite();
    const char* bin = getenv("HUTCH_SYSCALL_PROBE");
    if (!bin || sandbox().empty()) return;
    std::ifstream in(bin, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = server().Client().Request(
        "PUT", "/v1/sandboxes/" + sandbox() + "/fs?path=/usr/local/bin/probe&mode=0755", ss.str());
    uploaded_ = r.status == 201 && !ss.str().empty();
  }
  void SetUp() override {
    SharedServerTest::SetUp();
    ASSERT_TRUE(uploaded_) << "could not copy $HUTCH_SYSCALL_PROBE into the sandbox";
  }

  // Runs the probe for one call as root inside the sandbox.
  static ProbeResult Probe(const std::string& name) {
    ProbeResult p;
    auto r = Exec("/usr/local/bin/probe " + name);
    p.raw = r.dump();
    std::istringstream out(StdoutOf(r));
    std::string got;
    if (!(out >> got >> p.rc >> p.err) || got != name) p.err = -1;
    return p;
  }
  static void ExpectDenied(const std::string& name, int want = EPERM) {
    ProbeResult p = Probe(name);
    EXPECT_EQ(p.rc, -1) << name << ": " << p.raw;
    EXPECT_EQ(p.err, want) << name << " failed with errno " << p.err << " (want " << want << "): " << p.raw;
  }

  static inline bool uploaded_ = false;
};

}  // namespace

TEST_F(Syscall, MountIsDenied) {
  ExpectDenied("mount");
  EXPECT_EQ(Sh("grep -c ' /mnt ' /proc/self/mountinfo"), "0\n");
}

TEST_F(Syscall, Umount2IsDenied) {
  ExpectDenied("umount2");
  EXPECT_EQ(Sh("grep -c ' /proc ' /proc/self/mountinfo"), "1\n");
}

TEST_F(Syscall, PivotRootIsDenied) { ExpectDenied("pivot_root"); }

TEST_F(Syscall, NestedUserNamespaceIsDenied) {
  ExpectDenied("unshare_user");
  // The same through clone(CLONE_NEWUSER), and clone3 (whose flags BPF
  // cannot read) answers ENOSYS so libc falls back to the checked clone.
  ExpectDenied("clone_newuser");
  ExpectDenied("clone3", ENOSYS);
  ExpectDenied("setns");
}

TEST_F(Syscall, InitModuleIsDenied) { ExpectDenied("init_module"); }

TEST_F(Syscall, FinitModuleIsDenied) { ExpectDenied("finit_module"); }

TEST_F(Syscall, KexecLoadIsDenied) { ExpectDenied("kexec_load"); }

TEST_F(Syscall, BpfIsDenied) { ExpectDenied("bpf"); }

TEST_F(Syscall, PerfEventOpenIsDenied) { ExpectDenied("perf_event_open"); }

TEST_F(Syscall, IoUringSetupIsDenied) { ExpectDenied("io_uring_setup"); }

TEST_F(Syscall, UserfaultfdIsDenied) { ExpectDenied("userfaultfd"); }

TEST_F(Syscall, KeyctlIsDenied) { ExpectDenied("keyctl"); }

TEST_F(Syscall, AddKeyIsDenied) { ExpectDenied("add_key"); }

TEST_F(Syscall, PtraceOfTheAgentIsDenied) {
  // PID 1 inside is hutch-agent.
  EXPECT_EQ(Sh("grep -c hutch-age /proc/1/comm"), "1\n");
  ExpectDenied("ptrace_agent");
  // ptrace is denied whole (not only ATTACH), and so is reading another
  // process's memory.
  ExpectDenied("ptrace_traceme");
  ExpectDenied("process_vm_readv");
  EXPECT_EQ(Sh("echo alive"), "alive\n");
}

TEST_F(Syscall, MknodOfABlockDeviceIsDenied) {
  ExpectDenied("mknod_block");
  ExpectDenied("mknodat_char");
  EXPECT_EQ(Sh("ls /tmp/hutch-probe-blk /tmp/hutch-probe-chr 2>&1 | grep -c 'No such'"), "2\n");
  // The control: a FIFO is an ordinary file and still works.
  ProbeResult fifo = Probe("mknod_fifo");
  EXPECT_EQ(fifo.rc, 0) << fifo.raw;
  EXPECT_EQ(Sh("stat -c %F /tmp/hutch-probe-fifo"), "fifo\n");
}

TEST_F(Syscall, RebootIsDenied) {
  ExpectDenied("reboot");
  EXPECT_EQ(Sh("echo alive"), "alive\n");
}

TEST_F(Syscall, SettimeofdayIsDenied) {
  ExpectDenied("settimeofday");
  ExpectDenied("clock_settime");
}

TEST_F(Syscall, OpenByHandleAtIsDenied) { ExpectDenied("open_by_handle_at"); }

TEST_F(Syscall, ChrootIsDenied) { ExpectDenied("chroot"); }

TEST_F(Syscall, OrdinaryProcessCreationStillWorks) {
  // The control for the clone rules: fork/exec, threads and libc's clone3
  // fallback work as usual.
  auto r = Exec(
      "python3 -c 'import os,subprocess,threading; t=threading.Thread(target=lambda: None); "
                         "t.start(); t.join(); print(subprocess.run([\"echo\",\"child\"],capture_output=True)"
                         ".stdout.decode().strip(), os.fork() and \"parent\" or os._exit(0))'");
  EXPECT_EQ(StdoutOf(r), "child parent\n") << r.dump();
}
