#include "agent/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hutch::agent {

namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct Pipe {
  UniqueFd r, w;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return ErrnoError("pipe2");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Status SetNonBlocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return ErrnoError("fcntl O_NONBLOCK");
  return {};
}

// Candidate paths for argv[0], computed before fork so the child only calls
// execve. Mirrors execvp: a name with '/' is used as is, otherwise each PATH
// entry of the final environment is tried (an empty entry means cwd).
std::vector<std::string> ExecCandidates(const SpawnSpec& spec) {
  const std::string& prog = spec.argv[0];
  if (prog.find('/') != std::string::npos) return {prog};
  std::string path = kDefaultPath;
  for (const auto& kv : spec.env)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(pos, colon - pos);
    out.push_back(dir.empty() ? prog : dir + "/" + prog);
    pos = colon + 1;
  }
  return out;
}

// The oom_score_adj a command starts at: 500 above the agent's own, and
// at least 0, so the sandbox's OOM killer takes a command before the agent
// (PID 1: losing it ends the sandbox). The agent is at -999 when the host
// let the jail lower it (CAP_SYS_RESOURCE): its commands start at 0 as
// anywhere else. Where the host withholds that capability even from root,
// the agent stays at 0 and its commands start at 500 instead. Either way a
// command may lower itself back to the agent's value (the floor root set)
// but never below it. Read once: the jail sets the agent's value before
// exec.
const char* CommandOomScoreAdj() {
  static const std::string value = [] {
    int own = 0;
    UniqueFd fd(open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC));
    char buf[16] = {};
    if (fd && read(fd.get(), buf, sizeof buf - 1) > 0) own = atoi(buf);
    return std::to_string(std::clamp(own + 500, 0, 1000));
  }();
  return value.c_str();
}

// --- Child side: async-signal-safe calls only. ---

void WriteAll(int fd, const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

[[noreturn]] void Fail(const char* what, const char* subject, int err, int code) {
  WriteAll(2, what);
  WriteAll(2, subject);
  WriteAll(2, ": ");
  // strerrordesc_np only indexes a static table (no locale, no allocation).
  const char* desc = strerrordesc_np(err);
  WriteAll(2, desc ? desc : "error");
  WriteAll(2, "\n");
  _exit(code);
}

struct ChildArgs {
  char* const* argv;
  char* const* envp;
  const std::vector<const char*>* candidates;
  const char* cwd;
  const char* prog;
  uid_t uid;
  gid_t gid;
  int in, out, err;
  bool pty;  // in/out/err are a pty slave to make the controlling terminal
  const char* oom_score_adj;
};

[[noreturn]] void ChildMain(const ChildArgs& a) {
  setsid();
  // A session leader without a controlling terminal acquires the pty it
  // asks for; the shell's job control needs it.
  if (a.pty && ioctl(a.in, TIOCSCTTY, 0) < 0) Fail("hutch: ", "TIOCSCTTY", errno, 127);
  // Above the agent for the OOM killer (CommandOomScoreAdj; raising the
  // value needs no privilege).
  int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    [[maybe_unused]] ssize_t n = write(oom, a.oom_score_adj, strlen(a.oom_score_adj));
    close(oom);
  }
  // Likewise the scheduler: in a vm guest the agent runs at nice -10
  // (hutch-vm-init) so a CPU flood of its commands cannot starve it; they
  // start at 0 again. (A jail's agent is at 0 already.)
  (void)setpriority(PRIO_PROCESS, 0, 0);
  if (dup2(a.in, 0) < 0 || dup2(a.out, 1) < 0 || dup2(a.err, 2) < 0) _exit(127);
  // Fails when the user namespace denies setgroups; then there are no
  // supplementary groups to drop in the first place.
  (void)setgroups(0, nullptr);
  if (setresgid(a.gid, a.gid, a.gid) < 0) Fail("hutch: ", "setresgid", errno, 127);
  if (setresuid(a.uid, a.uid, a.uid) < 0) Fail("hutch: ", "setresuid", errno, 127);
  if (chdir(a.cwd) < 0) Fail("hutch: cd ", a.cwd, errno, 127);
  // The agent blocks SIGCHLD for its signalfd and ignores SIGPIPE; both
  // would otherwise be inherited across exec.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // exec resets caught signals by itself; only ignored ones carry over,
  // and SIGPIPE is the one the agent ignores (main.cc).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  close_range(3, ~0U, 0);
  int err = ENOENT;
  bool denied = false;
  for (const char* c : *a.candidates) {
    execve(c, a.argv, a.envp);
    err = errno;
    if (err == EACCES) denied = true;
    // Like execvp: keep searching past entries that cannot hold the program.
    if (err != ENOENT && err != ENOTDIR && err != EACCES && err != ELOOP && err != ENAMETOOLONG)
      break;
  }
  if (denied && (err == ENOENT || err == ENOTDIR)) err = EACCES;
  Fail("", a.prog, err, (err == EACCES || err == ENOEXEC || err == EPERM) ? 126 : 127);
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Forks the child with the given fds as its 0, 1 and 2.
Result<Spawned> SpawnChild(const SpawnSpec& spec, int in, int out, int err, bool pty) {
  const std::vector<std::string> candidates = ExecCandidates(spec);
  std::vector<const char*> cand_ptrs;
  for (const auto& c : candidates) cand_ptrs.push_back(c.c_str());
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<char*> envp = CStrings(spec.env);
  ChildArgs a{argv.data(),
              envp.data(),
              &cand_ptrs,
              spec.cwd.c_str(),
              spec.argv[0].c_str(),
              spec.uid,
              spec.gid,
              in,
              out,
              err,
              pty,
              CommandOomScoreAdj()};

  pid_t pid = fork();
  if (pid < 0) {
    // EAGAIN/ENOMEM here means the sandbox's own pids or memory limit: the
    // caller's problem to solve inside the sandbox, not an agent fault.
    Error e = ErrnoError("fork");
    if (e.err == EAGAIN || e.err == ENOMEM) {
      e.code = Code::kSandboxResourceExhausted;
      e.message = "the sandbox is at its process or memory limit (" + e.message + ")";
    }
    return e;
  }
  if (pid == 0) ChildMain(a);

  Spawned s;
  s.pid = pid;
  return s;
}

}  // namespace

Result<Spawned> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty())
    return MakeError(Code::kInvalidRequest, "empty argv");
  if (spec.pty_slave >= 0)
    return SpawnChild(spec, spec.pty_slave, spec.pty_slave, spec.pty_slave, true);
  auto out = MakePipe();
  if (!out.ok()) return out.error();
  auto err = MakePipe();
  if (!err.ok()) return err.error();
  Pipe in;
  if (spec.stdin_pipe) {
    auto p = MakePipe();
    if (!p.ok()) return p.error();
    in = std::move(*p);
  } else {
    in.r.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in.r.valid()) return ErrnoError("open /dev/null");
  }
  // Our ends only: the child must see ordinary blocking pipes.
  HUTCH_CHECK_OK(SetNonBlocking(out->r.get()), "stdout pipe");
  HUTCH_CHECK_OK(SetNonBlocking(err->r.get()), "stderr pipe");
  if (in.w.valid()) HUTCH_CHECK_OK(SetNonBlocking(in.w.get()), "stdin pipe");

  auto child = SpawnChild(spec, in.r.get(), out->w.get(), err->w.get(), false);
  if (!child.ok()) return child.error();
  child->stdin_w = std::move(in.w);
  child->stdout_r = std::move(out->r);
  child->stderr_r = std::move(err->r);
  return child;
}

}  // namespace hutch::agent
