// Exec streams: kExecStart parsing, process I/O with credit, exit reporting.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "agent/agent.h"
#include "agent/log.h"
#include "agent/passwd.h"
#include "agent/spawn.h"

namespace hutch::agent {

using nlohmann::json;
using wire::Type;

namespace {

constexpr auto kDrainGrace = std::chrono::milliseconds(200);
constexpr size_t kMaxMetaBytes = 16 * 1024;
constexpr size_t kMaxBufferBytes = 64 << 20;
constexpr size_t kMaxPtyInput = 1 << 20;

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

// "user" may be a name or a numeric uid.
std::string UserField(const json& j) {
  if (!j.contains("user") || j["user"].is_null()) return "root";
  if (j["user"].is_number_unsigned()) return std::to_string(j["user"].get<uint64_t>());
  return j["user"].get<std::string>();
}

}  // namespace

// Turns a kExecStart / kProcStart / kPtyStart JSON into a SpawnSpec plus the
// stream options.
Result<ExecRequest> ParseExecRequest(std::string_view payload, bool argv_optional) {
  ExecRequest r;
  json j;
  try {
    j = json::parse(payload);
    if (!j.is_object()) return MakeError(Code::kInvalidRequest, "exec request is not an object");
    if (!argv_optional || j.contains("argv"))
      r.spawn.argv = j.at("argv").get<std::vector<std::string>>();
    r.timeout_ms = j.value("timeout_ms", int64_t{0});
    r.spawn.stdin_pipe = j.value("stdin", false);
    r.detach = j.value("detach", false);
    if (j.contains("meta") && !j["meta"].is_null()) {
      r.meta = j["meta"];
      // The host's notes are kept for as long as the process is listed.
      if (!r.meta.is_object() || DumpJson(r.meta).size() > kMaxMetaBytes)
        return MakeError(Code::kInvalidRequest, "meta must be an object of at most 16 KiB");
    }
    if (j.contains("stdin_data") && !j["stdin_data"].is_null())
      r.stdin_data = j["stdin_data"].get<std::string>();
    const int64_t buf = j.value("buffer_bytes", int64_t{0});
    if (buf < 0 || buf > int64_t{kMaxBufferBytes})
      return MakeError(Code::kInvalidRequest, "buffer_bytes out of range");
    r.buffer_bytes = static_cast<size_t>(buf);
  } catch (const json::exception& e) {
    return MakeError(Code::kInvalidRequest, std::string("bad exec request: ") + e.what());
  }
  if (!argv_optional && (r.spawn.argv.empty() || r.spawn.argv[0].empty()))
    return MakeError(Code::kInvalidRequest, "empty argv");
  if (!r.spawn.argv.empty() && r.spawn.argv[0].empty())
    return MakeError(Code::kInvalidRequest, "empty argv[0]");
  for (const auto& a : r.spawn.argv)
    if (HasNul(a)) return MakeError(Code::kInvalidRequest, "argv contains NUL");
  if (r.timeout_ms < 0) return MakeError(Code::kInvalidRequest, "negative timeout_ms");

  std::string user_name, cwd;
  std::map<std::string, std::string> env_override;
  try {
    user_name = UserField(j);
    cwd = j.contains("cwd") && !j["cwd"].is_null() ? j["cwd"].get<std::string>() : "";
    if (j.contains("env") && !j["env"].is_null())
      env_override = j["env"].get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    return MakeError(Code::kInvalidRequest, std::string("bad exec request: ") + e.what());
  }
  auto user = LookupUser(user_name);
  if (!user.ok()) return user.error();
  r.user = user->name;
  r.spawn.uid = user->uid;
  r.spawn.gid = user->gid;

  if (cwd.empty()) {
    // A user whose home is missing (e.g. nobody) still gets to run things.
    struct stat st {};
    cwd = stat(user->home.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? user->home : "/";
  } else {
    auto norm = NormalizePath(cwd, user->home);
    if (!norm.ok()) return norm.error();
    cwd = *norm;
    struct stat st {};
    if (stat(cwd.c_str(), &st) < 0)
      return Error{Code::kInvalidRequest, errno, "cwd " + cwd + ": " + std::strerror(errno)};
    if (!S_ISDIR(st.st_mode))
      return Error{Code::kInvalidRequest, ENOTDIR, "cwd " + cwd + ": not a directory"};
  }
  r.spawn.cwd = cwd;

  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      {"HOME", user->home},
      {"USER", user->name},
      {"LOGNAME", user->name},
      {"SHELL", user->shell},
      {"LANG", "C.UTF-8"},
  };
  for (auto& [k, v] : env_override) {
    if (k.empty() || k.find('=') != std::string::npos || HasNul(k) || HasNul(v))
      return MakeError(Code::kInvalidRequest, "bad env name or value");
    env[k] = v;
  }
  for (auto& [k, v] : env) r.spawn.env.push_back(k + "=" + v);
  return r;
}

json ExitJson(int status, bool timed_out, int64_t duration_ms, bool own_kernel) {
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const int code = sig ? 128 + sig : WEXITSTATUS(status);
  json j = {
      {"exit_code", code}, {"signal", sig}, {"timed_out", timed_out}, {"duration_ms", duration_ms}};
  // An agent with a kernel of its own (a vm guest: serial mode) adds that
  // kernel's OOM kills so far: the guest's OOM killer is invisible to the
  // host's cgroup of QEMU, and hutchd uses the count to tell an OOM kill
  // from another SIGKILL. A jail's agent shares the host's kernel, whose
  // cgroup hutchd reads itself: nothing to add, no read on its exits.
  if (own_kernel) {
    if (auto n = KernelOomKills()) j["oom_kills"] = *n;
  }
  return j;
}

std::optional<uint64_t> KernelOomKills() {
  std::ifstream in("/proc/vmstat");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value)
    if (key == "oom_kill") return value;
  return std::nullopt;
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Right after fork the child may not have called
// setsid() yet, so the group does not exist: then the child is still the only
// process and is signalled directly.
void SignalGroup(const Exec& e, int sig) {
  if (kill(-e.pid, sig) < 0 && errno == ESRCH && !e.exited) kill(e.pid, sig);
}

void Agent::StartExec(Connection& c, const wire::Frame& f) {
  auto req = ParseExecRequest(f.payload);
  if (!req.ok()) return SendError(c, f.stream, req.error());
  auto sp = Spawn(req->spawn);
  if (!sp.ok()) {
    Log("spawn: " + sp.error().message);
    return SendError(c, f.stream, sp.error());
  }
  auto e = std::make_unique<Exec>();
  e->id = next_id_++;
  e->conn = c.id;
  e->stream = f.stream;
  e->pid = sp->pid;
  e->detach = req->detach;
  e->out = std::move(sp->stdout_r);
  e->err = std::move(sp->stderr_r);
  e->in = std::move(sp->stdin_w);
  e->argv = req->spawn.argv;
  e->user = req->user;
  e->cwd = req->spawn.cwd;
  e->started_unix_ms = UnixMillisNow();
  e->start = e->last_progress = Clock::now();
  if (req->timeout_ms > 0) e->deadline = e->start + std::chrono::milliseconds(req->timeout_ms);
  Exec& ref = *e;
  pid_to_exec_[e->pid] = e->id;
  c.execs[f.stream] = e->id;
  execs_[e->id] = std::move(e);
  SendJson(c, Type::kStarted, f.stream, {{"pid", ref.pid}});
  UpdateWatches(ref);
}

void Agent::UpdateWatches(Exec& e) {
  const bool can_read = e.credit > 0;
  Watch(e.out.get(), Token(kStdoutTok, e.id), EPOLLIN, &e.out_watched, e.out.valid() && can_read);
  Watch(e.err.get(), Token(kStderrTok, e.id), EPOLLIN, &e.err_watched, e.err.valid() && can_read);
  Watch(e.in.get(), Token(kStdinTok, e.id), EPOLLOUT, &e.in_watched,
        e.in.valid() && !e.stdin_buf.empty());
}

// Closes one of the exec's fds, taking it out of the epoll set first.
static void CloseWatched(UniqueFd& fd, bool* watched, int epfd) {
  if (*watched) epoll_ctl(epfd, EPOLL_CTL_DEL, fd.get(), nullptr);
  *watched = false;
  fd.reset();
}

void Agent::OnExecFrame(Exec& e, const wire::Frame& f) {
  switch (f.type) {
    case Type::kStdin:
      // A terminal's input has no credit: keystrokes the shell does not
      // read are dropped past a bound, as a full tty input queue would.
      if (e.pty && e.stdin_buf.size() + f.payload.size() > kMaxPtyInput) {
        Log("pty stream " + std::to_string(e.stream) +
            ": input dropped (the program is not reading)");
        break;
      }
      if (e.in.valid() && !e.stdin_close) {
        e.stdin_buf += f.payload;
        PumpStdin(e);
      }
      break;
    case Type::kStdinClose:
      if (e.pty) break;  // the terminal stays; the shell sees EOF when it exits
      e.stdin_close = true;
      PumpStdin(e);
      break;
    case Type::kPtyResize:
      if (e.pty && !e.done) ResizePty(e, f);
      break;
    case Type::kSignal: {
      int sig = 0;
      try {
        sig = json::parse(f.payload).at("signal").get<int>();
      } catch (const json::exception&) {
      }
      if (sig <= 0 || sig >= NSIG) {
        Log("stream " + std::to_string(e.stream) + ": bad signal request ignored");
        break;
      }
      if (!e.done) SignalGroup(e, sig);
      break;
    }
    case Type::kCancel:
      if (!e.done) AbandonExec(e);
      break;
    case Type::kCredit: {
      const bool was_blocked = e.credit <= 0;
      e.credit += wire::DecodeCredit(f.payload);
      // The 200 ms drain grace counts only time in which we could read.
      if (was_blocked && e.credit > 0) e.last_progress = Clock::now();
      UpdateWatches(e);
      break;
    }
    default:
      break;
  }
}

void Agent::PumpStdin(Exec& e) {
  while (e.in.valid() && !e.stdin_buf.empty()) {
    ssize_t n = write(e.in.get(), e.stdin_buf.data(), e.stdin_buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // EPIPE: the process closed its stdin; what it did not read is lost.
      e.stdin_buf.clear();
      CloseWatched(e.in, &e.in_watched, epoll_.get());
      break;
    }
    e.stdin_buf.erase(0, static_cast<size_t>(n));
  }
  if (e.in.valid() && e.stdin_buf.empty() && e.stdin_close)
    CloseWatched(e.in, &e.in_watched, epoll_.get());
  UpdateWatches(e);
}

void Agent::OnExecPipe(uint64_t exec_id, int kind) {
  auto it = execs_.find(exec_id);
  if (it == execs_.end() || it->second->done) return;
  Exec& e = *it->second;
  if (kind == kStdinTok) PumpStdin(e);
  else ReadOutput(e, kind == kStderrTok);
}

void Agent::ReadOutput(Exec& e, bool is_err) {
  UniqueFd& fd = is_err ? e.err : e.out;
  bool* watched = is_err ? &e.err_watched : &e.out_watched;
  if (!fd.valid() || e.credit <= 0) return UpdateWatches(e);
  static char buf[wire::kChunk];
  const size_t want = static_cast<size_t>(std::min<int64_t>(e.credit, wire::kChunk));
  ssize_t n = read(fd.get(), buf, want);
  if (n > 0) {
    e.last_progress = Clock::now();
    if (e.background) {
      ProcOutput(e, is_err, std::string_view(buf, static_cast<size_t>(n)));
    } else if (Connection* c = LiveConn(e.conn)) {
      e.credit -= n;
      Send(*c, is_err ? Type::kStderr : Type::kStdout, e.stream,
           std::string_view(buf, static_cast<size_t>(n)));
    }
  } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    CloseWatched(fd, watched, epoll_.get());
  }
  UpdateWatches(e);
  MaybeFinish(e);
}

void Agent::Reap() {
  signalfd_siginfo si;
  while (read(sigfd_.get(), &si, sizeof(si)) == sizeof(si)) {
  }
  // As PID 1 we also inherit every orphan in the sandbox: reap them all.
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    auto it = pid_to_exec_.find(pid);
    if (it == pid_to_exec_.end()) continue;
    auto e = execs_.find(it->second);
    pid_to_exec_.erase(it);
    if (e == execs_.end()) continue;
    Exec& ex = *e->second;
    ex.exited = true;
    ex.status = status;
    ex.exit_time = ex.last_progress = Clock::now();
    MaybeFinish(ex);
  }
}

void Agent::MaybeFinish(Exec& e) {
  if (e.exited && !e.done && !e.out.valid() && !e.err.valid()) FinishExec(e);
}

void Agent::FinishExec(Exec& e) {
  if (e.done) return;
  e.done = true;
  CloseWatched(e.out, &e.out_watched, epoll_.get());
  CloseWatched(e.err, &e.err_watched, epoll_.get());
  CloseWatched(e.in, &e.in_watched, epoll_.get());
  // What the shell left running on its terminal goes with it.
  if (e.pty) HangupSession(e.pid);
  if (e.background) return ProcFinished(e);
  Connection* c = LiveConn(e.conn);
  if (c == nullptr) return;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(e.exit_time - e.start).count();
  SendJson(*c, Type::kExit, e.stream, ExitJson(e.status, e.timed_out, ms, serial()));
  c->execs.erase(e.stream);
}

void Agent::AbandonExec(Exec& e) {
  if (e.background) return;  // owned by no connection
  if (e.pty) HangupSession(e.pid);
  else SignalGroup(e, SIGKILL);
}

void Agent::OrphanExec(Exec& e) {
  e.conn = 0;
  e.credit = kUnlimitedCredit;
  e.stdin_buf.clear();
  CloseWatched(e.in, &e.in_watched, epoll_.get());
  UpdateWatches(e);
  MaybeFinish(e);
}

void Agent::RunTimers(Clock::time_point now) {
  for (auto& [id, ptr] : execs_) {
    Exec& e = *ptr;
    if (e.done) continue;
    if (e.deadline && now >= *e.deadline) {
      e.deadline.reset();
      SignalGroup(e, SIGKILL);
      if (!e.exited) e.timed_out = true;
    }
    // Output pipes still open after exit: a background child holds them.
    if (e.exited && e.credit > 0 && now >= e.last_progress + kDrainGrace) FinishExec(e);
  }
  RunHangups(now);
}

}  // namespace hutch::agent
