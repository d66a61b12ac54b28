#include "driver/vm/qemu_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>

namespace hutch::vm {

namespace {

enum Step : int {
  kStepWait = 1,
  kStepSession,
  kStepNamespaces,
  kStepNetns,
  kStepMounts,
  kStepChdir,
  kStepIds,
  kStepNoNewPrivs,
  kStepFds,
  kStepExec
};

const char* StepName(int s) {
  switch (s) {
    case kStepWait:
      return "wait for cgroup";
    case kStepSession:
      return "setsid";
    case kStepNamespaces:
      return "unshare namespaces";
    case kStepNetns:
      return "network namespace";
    case kStepMounts:
      return "private mounts";
    case kStepChdir:
      return "chdir to sandbox dir";
    case kStepIds:
      return "drop to the vm user";
    case kStepNoNewPrivs:
      return "no_new_privs";
    case kStepFds:
      return "close fds";
    case kStepExec:
      return "exec qemu";
    default:
      return "?";
  }
}

constexpr size_t kMaxPass = 4;
constexpr int kHighFd = 64;

// Child side: raw syscalls only (hutchd may have other threads).
[[noreturn]] void Fail(int fd, int step) {
  int msg[2] = {step, errno};
  ssize_t ignored = write(fd, msg, sizeof msg);
  (void)ignored;
  _exit(127);
}

}  // namespace

Result<QemuProcess> StartQemu(const QemuLaunch& l) {
  if (l.pass_fds.size() > kMaxPass) return MakeError(Code::kInternal, "too many fds for qemu");
  int pass_arr[kMaxPass];
  for (size_t i = 0; i < l.pass_fds.size(); ++i) pass_arr[i] = l.pass_fds[i];
  const std::span<const int> pass(pass_arr, l.pass_fds.size());
  std::vector<char*> argv;
  for (const auto& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  UniqueFd log(open(l.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!log) return ErrnoError("open " + l.log_path);
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) return ErrnoError("open /dev/null");
  int go[2], report[2];
  if (pipe2(go, O_CLOEXEC) != 0) return ErrnoError("pipe");
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoError("pipe");
  UniqueFd rep_r(report[0]), rep_w(report[1]);

  const pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork qemu");
  if (pid == 0) {
    const int rfd = rep_w.get();
    char b;
    go_w.reset();
    if (read(go_r.get(), &b, 1) != 1) Fail(rfd, kStepWait);
    if (setsid() < 0) Fail(rfd, kStepSession);
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) != 0) Fail(rfd, kStepNamespaces);
    if (l.netns_fd >= 0 ? setns(l.netns_fd, CLONE_NEWNET) != 0 : unshare(CLONE_NEWNET) != 0)
      Fail(rfd, kStepNetns);
    // Nothing QEMU might mount (it mounts nothing) propagates to the host.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Fail(rfd, kStepMounts);
    if (chdir(l.dir.c_str()) != 0) Fail(rfd, kStepChdir);
    if (setgroups(0, nullptr) != 0 || setresgid(l.gid, l.gid, l.gid) != 0 ||
        setresuid(l.uid, l.uid, l.uid) != 0)
      Fail(rfd, kStepIds);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(rfd, kStepNoNewPrivs);
    if (dup2(devnull.get(), 0) < 0 || dup2(log.get(), 1) < 0 || dup2(log.get(), 2) < 0)
      Fail(rfd, kStepFds);
    // The passed fds go to 3, 4, …: first out of the way (above kHighFd,
    // where none of them or the report pipe can be overwritten), then down.
    int report = rfd;
    if (!pass.empty()) {
      report = fcntl(rfd, F_DUPFD_CLOEXEC, kHighFd);
      if (report < 0) Fail(rfd, kStepFds);
      int high[kMaxPass];
      for (size_t i = 0; i < pass.size(); ++i)
        if ((high[i] = fcntl(pass[i], F_DUPFD_CLOEXEC, kHighFd)) < 0) Fail(report, kStepFds);
      for (size_t i = 0; i < pass.size(); ++i)
        if (dup2(high[i], 3 + static_cast<int>(i)) < 0)
          Fail(report, kStepFds);  // dup2 clears CLOEXEC
    }
    const unsigned first = 3 + static_cast<unsigned>(pass.size());
    // Every other fd of hutchd (sockets, the state db, agents) is closed;
    // the report pipe is close-on-exec and must stay open until exec.
    if (static_cast<unsigned>(report) > first &&
        syscall(SYS_close_range, first, report - 1, 0) != 0)
      Fail(report, kStepFds);
    if (syscall(SYS_close_range, report + 1, ~0U, 0) != 0) Fail(report, kStepFds);
    execve(argv[0], argv.data(), envp);
    Fail(report, kStepExec);
  }
  go_r.reset();
  rep_w.reset();
  QemuProcess p;
  p.pid = pid;
  p.pidfd.reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  auto kill_child = [&](Error e) -> Error {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return e;
  };
  if (!p.pidfd) return kill_child(ErrnoError("pidfd_open qemu"));
  if (l.place) {
    if (auto st = l.place(pid); !st.ok()) return kill_child(st.error());
  }
  char b = 1;
  if (write(go_w.get(), &b, 1) != 1) return kill_child(ErrnoError("release qemu child"));
  go_w.reset();
  // EOF on the report pipe: exec happened (the pipe is close-on-exec).
  pollfd pf{rep_r.get(), POLLIN, 0};
  if (poll(&pf, 1, 5000) != 1)
    return kill_child(MakeError(Code::kUnavailable, "qemu child did not exec in time"));
  int msg[2] = {0, 0};
  ssize_t n = read(rep_r.get(), msg, sizeof msg);
  if (n == static_cast<ssize_t>(sizeof msg)) {
    waitpid(pid, nullptr, 0);
    errno = msg[1];
    return ErrnoError(std::string("start qemu: ") + StepName(msg[0]));
  }
  return p;
}

}  // namespace hutch::vm
