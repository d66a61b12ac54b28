#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/unique_fd.h"

namespace hutch {

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string p = std::string(dir) + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

asio::awaitable<bool> WaitReadable(int fd, std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dupfd < 0) co_return false;
  asio::posix::stream_descriptor d(ex, dupfd);
  asio::steady_timer t(ex);
  t.expires_after(timeout);
  bool expired = false;
  t.async_wait([&](boost::system::error_code ec) {
    if (!ec) {
      expired = true;
      boost::system::error_code ignored;
      d.cancel(ignored);
    }
  });
  boost::system::error_code ec;
  co_await d.async_wait(asio::posix::descriptor_base::wait_read,
                        asio::redirect_error(asio::use_awaitable, ec));
  t.cancel();
  co_return !ec && !expired;
}

asio::awaitable<Status> RunTool(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout) {
  co_return co_await RunToolWithInput(argv, nullptr, timeout);
}

asio::awaitable<Status> RunToolWithInput(const std::vector<std::string>& argv,
                                         const std::string* input,
                                         std::chrono::milliseconds timeout) {
  if (argv.empty()) co_return MakeError(Code::kInternal, "RunTool: empty argv");
  const std::string& tool = argv[0];
  // Output goes to an anonymous file, not a pipe: a chatty tool can never
  // block on a full pipe while we wait for it to exit.
  UniqueFd out(memfd_create("tool-output", MFD_CLOEXEC));
  if (!out) co_return ErrnoError("memfd_create");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const char* envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", nullptr};
  // Input comes from an anonymous file too: written whole before the tool
  // starts, so nothing here waits on the tool reading it.
  UniqueFd in;
  if (input) {
    in.reset(memfd_create("tool-input", MFD_CLOEXEC));
    if (!in) co_return ErrnoError("memfd_create");
    size_t off = 0;
    while (off < input->size()) {
      ssize_t n = write(in.get(), input->data() + off, input->size() - off);
      if (n <= 0) co_return ErrnoError("write tool input");
      off += static_cast<size_t>(n);
    }
    if (lseek(in.get(), 0, SEEK_SET) != 0) co_return ErrnoError("rewind tool input");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in) posix_spawn_file_actions_adddup2(&fa, in.get(), 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, out.get(), 2);
  pid_t pid = -1;
  int e = posix_spawn(&pid, tool.c_str(), &fa, nullptr, args.data(), const_cast<char**>(envp));
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) co_return MakeError(Code::kInternal, "spawn " + tool + ": " + strerror(e));
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  bool done = pidfd ? co_await WaitReadable(pidfd.get(), timeout) : true;
  if (!done) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (done && WIFEXITED(st) && WEXITSTATUS(st) == 0) co_return Status{};
  std::string tail;
  off_t size = lseek(out.get(), 0, SEEK_END);
  if (size > 0) {
    off_t from = size > 2048 ? size - 2048 : 0;
    tail.resize(static_cast<size_t>(size - from));
    ssize_t n = pread(out.get(), tail.data(), tail.size(), from);
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  }
  std::string why = !done             ? "timed out"
                    : WIFEXITED(st)   ? "exit status " + std::to_string(WEXITSTATUS(st))
                    : WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st))
                                      : "status " + std::to_string(st);
  co_return MakeError(Code::kInternal,
                      tool + " failed (" + why + ")" + (tail.empty() ? "" : ": " + tail));
}

namespace {

// What a forked child may call before execve: async-signal-safe functions
// only (hutchd has other threads; their locks may be held at the fork), so
// numbers are formatted by hand.
struct ChildText {
  char buf[128];
  size_t len = 0;
  ChildText& Add(const char* s) {
    while (*s && len + 1 < sizeof buf) buf[len++] = *s++;
    buf[len] = 0;
    return *this;
  }
  ChildText& Add(long v) {
    char num[24];
    int n = 0;
    for (unsigned long u = v < 0 ? 0 : static_cast<unsigned long>(v); n == 0 || u > 0; u /= 10)
      num[n++] = static_cast<char>('0' + u % 10);
    while (n > 0 && len + 1 < sizeof buf) buf[len++] = num[--n];
    buf[len] = 0;
    return *this;
  }
};

[[noreturn]] void ChildFail(const char* what) {
  ChildText t;
  t.Add("hutchd: ").Add(what).Add(": errno ").Add(static_cast<long>(errno)).Add("\n");
  const char* p = t.buf;
  for (size_t left = t.len; left > 0;) {
    ssize_t w = write(2, p, left);
    if (w <= 0) break;
    p += w;
    left -= static_cast<size_t>(w);
  }
  _exit(125);
}

bool WriteWhole(const char* path, const std::string& text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// The child's side of ToolUserNamespace, then execve. Everything it needs
// was formatted before the fork.
[[noreturn]] void ExecInUserNamespace(char* const* args, char* const* envp,
                                      const ToolUserNamespace& ns, const std::string& id_map) {
  const std::string& workdir = ns.workdir;
  // Still the host's root: a private mount namespace, /tmp fresh, the
  // workdir where the tool can reach it once it is no longer root.
  if (unshare(CLONE_NEWNS) != 0) ChildFail("unshare(CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    ChildFail("make mounts private");
  // Opened in this namespace (a bind's source must be in it) before the
  // tmpfs, which hides a workdir under /tmp.
  const int wd = open(workdir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (wd < 0) ChildFail("open the workdir");
  // Also before the tmpfs: the layers may lie under /tmp (a test's state
  // dir). The bind below is recursive, so the tool sees this mount.
  if (!ns.overlay_target.empty() && mount("overlay", ns.overlay_target.c_str(), "overlay",
                                          MS_NOSUID | MS_NODEV, ns.overlay_options.c_str()) != 0)
    ChildFail("mount the overlay");
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    ChildFail("mount tmpfs on /tmp");
  if (mkdir(kToolWorkdir, 0755) != 0) ChildFail("mkdir workdir");
  ChildText wd_path;
  wd_path.Add("/proc/self/fd/").Add(static_cast<long>(wd));
  if (mount(wd_path.buf, kToolWorkdir, nullptr, MS_BIND | MS_REC, nullptr) != 0)
    ChildFail("bind the workdir");
  close(wd);
  // Only a process with CAP_SETUID over the parent namespace may map a
  // range of ids: a helper forked before the unshare writes the maps.
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) ChildFail("pipe2");
  const pid_t helper = fork();
  if (helper < 0) ChildFail("fork");
  if (helper == 0) {
    close(sync[1]);
    char c = 0;
    if (read(sync[0], &c, 1) != 1) _exit(1);
    const long target = getppid();
    ChildText uid_map, gid_map;
    uid_map.Add("/proc/").Add(target).Add("/uid_map");
    gid_map.Add("/proc/").Add(target).Add("/gid_map");
    if (!WriteWhole(uid_map.buf, id_map)) _exit(2);
    if (!WriteWhole(gid_map.buf, id_map)) _exit(3);
    _exit(0);
  }
  close(sync[0]);
  if (unshare(CLONE_NEWUSER) != 0) ChildFail("unshare(CLONE_NEWUSER)");
  if (write(sync[1], "u", 1) != 1) ChildFail("wake the id-map helper");
  close(sync[1]);
  int st = 0;
  while (waitpid(helper, &st, 0) < 0)
    if (errno != EINTR) ChildFail("wait for the id-map helper");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    errno = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    ChildFail("write the uid/gid map (helper status)");
  }
  // Root of the new namespace (the creator holds every capability there).
  if (setresgid(0, 0, 0) != 0) ChildFail("setresgid");
  if (setgroups(0, nullptr) != 0) ChildFail("setgroups");
  if (setresuid(0, 0, 0) != 0) ChildFail("setresuid");
  execve(args[0], args, envp);
  ChildFail("execve");
}

}  // namespace

asio::awaitable<Result<int>> RunToolStreaming(
    const std::vector<std::string>& argv, const std::vector<std::string>& env,
    std::chrono::milliseconds timeout,
    std::function<asio::awaitable<void>(std::string_view)> on_output,
    const ToolUserNamespace* userns) {
  if (argv.empty()) co_return MakeError(Code::kInternal, "RunToolStreaming: empty argv");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) co_return ErrnoError("pipe2");
  UniqueFd rd(fds[0]), wr(fds[1]);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (userns) {
    if (userns->uid_base == 0 || userns->count == 0 || userns->workdir.empty())
      co_return MakeError(Code::kInternal, "RunToolStreaming: an empty user namespace");
    const std::string id_map =
        "0 " + std::to_string(userns->uid_base) + " " + std::to_string(userns->count) + "\n";
    UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull) co_return ErrnoError("open /dev/null");
    pid = fork();
    if (pid < 0) co_return ErrnoError("fork");
    if (pid == 0) {
      setpgid(0, 0);  // its own process group, as below
      if (dup2(devnull.get(), 0) < 0 || dup2(wr.get(), 1) < 0 || dup2(wr.get(), 2) < 0) _exit(125);
      ExecInUserNamespace(args.data(), envp.data(), *userns, id_map);
    }
    setpgid(pid, pid);  // either side may run first
  } else {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
    // Its own process group, so a timeout kills what it started too.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int e = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (e != 0) co_return MakeError(Code::kInternal, "spawn " + argv[0] + ": " + strerror(e));
  }
  wr.reset();
  auto ex = co_await asio::this_coro::executor;
  asio::posix::stream_descriptor out(ex, rd.release());
  asio::steady_timer timer(ex);
  bool timed_out = false;
  timer.expires_after(timeout);
  timer.async_wait([&](boost::system::error_code ec) {
    if (ec) return;
    timed_out = true;
    kill(-pid, SIGKILL);
  });
  std::string buf(16384, '\0');
  while (true) {
    boost::system::error_code ec;
    size_t n = co_await out.async_read_some(asio::buffer(buf),
                                            asio::redirect_error(asio::use_awaitable, ec));
    if (n > 0) co_await on_output(std::string_view(buf.data(), n));
    if (ec) break;
  }
  // Its output is closed; it may still be exiting.
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd && !co_await WaitReadable(pidfd.get(), std::chrono::seconds(30))) kill(-pid, SIGKILL);
  timer.cancel();
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) co_return 128 + SIGKILL;
  if (WIFEXITED(st)) co_return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) co_return 128 + WTERMSIG(st);
  co_return st;
}

}  // namespace hutch
