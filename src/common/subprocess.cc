#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

asio::awaitable<Result<int>> RunToolStreaming(
    const std::vector<std::string>& argv, const std::vector<std::string>& env,
    std::chrono::milliseconds timeout,
    std::function<asio::awaitable<void>(std::string_view)> on_output) {
  if (argv.empty()) co_return MakeError(Code::kInternal, "RunToolStreaming: empty argv");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) co_return ErrnoError("pipe2");
  UniqueFd rd(fds[0]), wr(fds[1]);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
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
  pid_t pid = -1;
  int e = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (e != 0) co_return MakeError(Code::kInternal, "spawn " + argv[0] + ": " + strerror(e));
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
