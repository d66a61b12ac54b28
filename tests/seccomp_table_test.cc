// The jail's seccomp table (src/driver/jail/seccomp_table.cc): docs and
// table in step, the compiled filter's answers checked in a forked child
// that installs it as a sandbox's agent does (issue 32). The in-sandbox
// proof is tests/security/syscalls_test.cc; this one runs without hutchd.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "driver/jail/seccomp_policy.h"
#include "driver/jail/seccomp_table.h"

namespace {

using hutch::jail::SeccompPolicy;

constexpr const char* kBegin =
    "<!-- seccomp-table:begin (generated from src/driver/jail/seccomp_table.cc) -->\n";
constexpr const char* kEnd = "<!-- seccomp-table:end -->";

TEST(SeccompTable, DocsShowTheTable) {
  const char* src = getenv("HUTCH_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "HUTCH_SOURCE_DIR unset";
  std::ifstream in(std::string(src) + "/docs/security.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t b = doc.find(kBegin);
  const size_t e = doc.find(kEnd);
  ASSERT_NE(b, std::string::npos) << "docs/security.md lacks " << kBegin;
  ASSERT_NE(e, std::string::npos);
  const std::string want = hutch::jail::SeccompTableMarkdown();
  EXPECT_EQ(doc.substr(b + strlen(kBegin), e - b - strlen(kBegin)), want)
      << "docs/security.md is out of step with the table; paste this between the markers:\n"
      << want;
}

TEST(SeccompTable, EachSyscallHasOneRowAndEveryRowAReason) {
  std::set<std::string> seen;
  for (const auto& row : hutch::jail::SeccompTable()) {
    EXPECT_GT(strlen(row.why), 0u) << row.names;
    EXPECT_GT(strlen(row.docker), 0u) << row.names;
    std::istringstream names(row.names);
    std::string n;
    while (names >> n) EXPECT_TRUE(seen.insert(n).second) << n << " is in two rows";
  }
}

TEST(SeccompTable, CompilesToAProgramTheKernelTakes) {
  auto p = SeccompPolicy::Build();
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_GT(p->instructions(), 100u);
  EXPECT_LE(p->instructions(), 4096u);  // BPF_MAXINSNS
  std::cout << "seccomp program: " << p->instructions() << " instructions\n";
}

// Runs `call` in a child under the filter; returns -errno or the result.
long UnderFilter(const SeccompPolicy& p, const std::function<long()>& call) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    long r = -9999;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p.program(), 0, 0) == 0) {
      errno = 0;
      r = call();
      if (r < 0) r = -errno;
    }
    (void)!write(fds[1], &r, sizeof r);
    _exit(0);
  }
  close(fds[1]);
  long r = -8888;
  EXPECT_EQ(read(fds[0], &r, sizeof r), static_cast<ssize_t>(sizeof r));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return r;
}

long Socket(long family, long type, long proto) { return syscall(SYS_socket, family, type, proto); }

TEST(SeccompTable, FilterAnswers) {
  auto p = SeccompPolicy::Build();
  ASSERT_TRUE(p.ok());
  const SeccompPolicy& f = *p;
  // Socket families.
  EXPECT_GE(UnderFilter(f, [] { return Socket(AF_UNIX, SOCK_STREAM, 0); }), 0);
  EXPECT_GE(UnderFilter(f, [] { return Socket(AF_INET, SOCK_DGRAM, 0); }), 0);
  EXPECT_GE(UnderFilter(f, [] { return Socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0); }), 0);
  EXPECT_GE(UnderFilter(f, [] { return Socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); }), 0);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(AF_VSOCK, SOCK_STREAM, 0); }), -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(0x100000000L | AF_VSOCK, SOCK_STREAM, 0); }),
            -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(AF_PACKET, SOCK_RAW, 0); }), -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(AF_ALG, SOCK_SEQPACKET, 0); }), -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT); }),
            -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(-1L, SOCK_RAW, 0); }), -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f, [] { return Socket(1000L, SOCK_RAW, 0); }), -EAFNOSUPPORT);
  EXPECT_EQ(UnderFilter(f,
                        [] {
                          int sv[2];
                          return syscall(SYS_socketpair, long{AF_VSOCK}, long{SOCK_STREAM}, 0L, sv);
                        }),
            -EAFNOSUPPORT);
  // Personalities: Docker's five pass, others do not.
  EXPECT_GE(UnderFilter(f, [] { return syscall(SYS_personality, 0xffffffffL); }), 0);
  EXPECT_GE(UnderFilter(f, [] { return syscall(SYS_personality, long{PER_LINUX32}); }), 0);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(SYS_personality, long{ADDR_NO_RANDOMIZE}); }),
            -EPERM);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(SYS_personality, long{READ_IMPLIES_EXEC}); }),
            -EPERM);
  // ioctl: TIOCSTI only.
  EXPECT_EQ(UnderFilter(f,
                        [] {
                          char c = 'x';
                          return syscall(SYS_ioctl, 0L, long{TIOCSTI}, &c);
                        }),
            -EPERM);
  EXPECT_EQ(UnderFilter(f,
                        [] {
                          int n = 0;
                          return syscall(SYS_ioctl, 999L, long{FIONREAD}, &n);
                        }),
            -EBADF);
  // mknod: FIFOs yes, devices no.
  EXPECT_EQ(
      UnderFilter(
          f, [] { return syscall(SYS_mknod, "/nonexistent/dir/f", long{S_IFIFO | 0600}, 0L); }),
      -ENOENT);
  EXPECT_EQ(
      UnderFilter(
          f, [] { return syscall(SYS_mknod, "/nonexistent/dir/c", long{S_IFCHR | 0600}, 0L); }),
      -EPERM);
  // clone with a namespace flag; clone3.
  EXPECT_EQ(UnderFilter(
                f, [] { return syscall(SYS_clone, long{CLONE_NEWNET | SIGCHLD}, 0L, 0L, 0L, 0L); }),
            -EPERM);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(435L, nullptr, 0L); }), -ENOSYS);
  // Unnamed and newer-than-the-table numbers.
  EXPECT_EQ(UnderFilter(f, [] { return syscall(467L, long{AT_FDCWD}, "/", 0L, nullptr, 0L); }),
            -ENOSYS);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(1000L); }), -ENOSYS);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(SYS_sysfs, 3L); }), -EPERM);
  EXPECT_EQ(UnderFilter(f, [] { return syscall(SYS_set_mempolicy, 0L, nullptr, 0L); }), -EPERM);
  // Ordinary calls.
  EXPECT_GT(UnderFilter(f, [] { return syscall(SYS_getpid); }), 0);
  EXPECT_GE(UnderFilter(f, [] { return syscall(SYS_openat, long{AT_FDCWD}, "/", long{O_RDONLY}); }),
            0);
}

}  // namespace
