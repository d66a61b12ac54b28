// Terminals (docs/wire.md "PTY"): a shell on a pseudo-terminal the agent
// opens inside the sandbox, its output streamed under credit like an exec's,
// and, when the terminal goes away, a hangup of the whole session.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "agent/agent.h"
#include "agent/log.h"

namespace hutch::agent {

using nlohmann::json;
using wire::Type;

namespace {

// Between the SIGHUP of a session and the SIGKILL of what is left of it:
// long enough for a shell to save its history, short enough that a closed
// terminal's processes are gone promptly.
constexpr auto kHangupGrace = std::chrono::milliseconds(500);
constexpr auto kKillRetry = std::chrono::milliseconds(50);
constexpr int kMaxKillPasses = 20;

Result<winsize> ParseSize(const json& j) {
  winsize ws{};
  try {
    const int64_t cols = j.value("cols", int64_t{80});
    const int64_t rows = j.value("rows", int64_t{24});
    if (cols < 1 || cols > 10000 || rows < 1 || rows > 10000)
      return MakeError(Code::kInvalidRequest, "cols and rows must be within 1..10000");
    ws.ws_col = static_cast<unsigned short>(cols);
    ws.ws_row = static_cast<unsigned short>(rows);
  } catch (const json::exception& e) {
    return MakeError(Code::kInvalidRequest, std::string("bad terminal size: ") + e.what());
  }
  return ws;
}

// The pty pair: master for us, slave for the shell. The slave comes from
// TIOCGPTPEER, so no path under /dev/pts is looked up (nothing in the
// sandbox can swap it).
struct PtyPair {
  UniqueFd master, slave;
};

Result<PtyPair> OpenPty() {
  PtyPair p;
  p.master.reset(open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (!p.master) return ErrnoError("open /dev/ptmx");
  int unlock = 0;
  if (ioctl(p.master.get(), TIOCSPTLCK, &unlock) < 0) return ErrnoError("unlock pty");
  p.slave.reset(ioctl(p.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.slave) return ErrnoError("open pty slave");
  return p;
}

// Pids whose session id is `sid` (field 6 of /proc/<pid>/stat, after the
// command name, which may itself contain spaces and parentheses).
std::vector<pid_t> SessionMembers(pid_t sid) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* de = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(de->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream f(std::string("/proc/") + de->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(stat.substr(rp + 1));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(rest >> state >> ppid >> pgrp >> session)) continue;
    if (session == sid) out.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return out;
}

}  // namespace

void Agent::StartPty(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  auto req = ParseExecRequest(f.payload, /*argv_optional=*/true);
  if (!req.ok()) return SendError(c, s, req.error());
  json j = json::parse(f.payload);  // already parsed once: valid
  auto size = ParseSize(j);
  if (!size.ok()) return SendError(c, s, size.error());
  if (req->spawn.argv.empty()) {
    // A login shell, so /etc/profile sets up PATH, prompt and friends.
    req->spawn.argv = access("/bin/bash", X_OK) == 0 ? std::vector<std::string>{"/bin/bash", "-l"}
                                                     : std::vector<std::string>{"/bin/sh", "-l"};
  }
  bool has_term = false;
  for (const auto& kv : req->spawn.env) has_term = has_term || kv.rfind("TERM=", 0) == 0;
  if (!has_term) req->spawn.env.push_back("TERM=xterm-256color");

  auto pty = OpenPty();
  if (!pty.ok()) {
    Log("pty: " + pty.error().message);
    return SendError(c, s, pty.error().Context("open a terminal"));
  }
  if (ioctl(pty->master.get(), TIOCSWINSZ, &*size) < 0)
    return SendError(c, s, ErrnoError("set terminal size"));
  // The terminal belongs to its user, as login(1) would arrange; if the
  // filesystem refuses, the shell still has the fds it needs.
  (void)fchown(pty->slave.get(), req->spawn.uid, static_cast<gid_t>(-1));
  (void)fchmod(pty->slave.get(), 0620);
  UniqueFd writer(fcntl(pty->master.get(), F_DUPFD_CLOEXEC, 3));
  if (!writer) return SendError(c, s, ErrnoError("dup pty master"));

  req->spawn.pty_slave = pty->slave.get();
  auto sp = Spawn(req->spawn);
  // Our copy of the slave must go, or the master never sees the shell's
  // side close (no EIO when everything on the terminal has exited).
  pty->slave.reset();
  if (!sp.ok()) {
    Log("spawn pty: " + sp.error().message);
    return SendError(c, s, sp.error());
  }
  auto e = std::make_unique<Exec>();
  e->id = next_id_++;
  e->conn = c.id;
  e->stream = s;
  e->pid = sp->pid;
  e->pty = true;
  e->out = std::move(pty->master);
  e->in = std::move(writer);
  e->argv = req->spawn.argv;
  e->user = req->user;
  e->cwd = req->spawn.cwd;
  e->started_unix_ms = UnixMillisNow();
  e->start = e->last_progress = Clock::now();
  if (req->timeout_ms > 0) e->deadline = e->start + std::chrono::milliseconds(req->timeout_ms);
  Exec& ref = *e;
  pid_to_exec_[e->pid] = e->id;
  c.execs[s] = e->id;
  execs_[e->id] = std::move(e);
  SendJson(c, Type::kStarted, s, {{"pid", ref.pid}});
  UpdateWatches(ref);
}

void Agent::ResizePty(Exec& e, const wire::Frame& f) {
  json j;
  try {
    j = json::parse(f.payload);
  } catch (const json::exception&) {
    Log("pty stream " + std::to_string(e.stream) + ": malformed resize ignored");
    return;
  }
  auto size = ParseSize(j);
  if (!size.ok() || !e.out.valid()) return;
  // The kernel sends SIGWINCH to the terminal's foreground process group.
  if (ioctl(e.out.get(), TIOCSWINSZ, &*size) < 0)
    Log(std::string("TIOCSWINSZ: ") + std::strerror(errno));
}

void Agent::HangupSession(pid_t sid) {
  for (const auto& h : hangups_)
    if (h.sid == sid) return;
  for (pid_t pid : SessionMembers(sid)) {
    kill(pid, SIGHUP);
    kill(pid, SIGCONT);  // a stopped job would not see the hangup
  }
  hangups_.push_back(Hangup{sid, Clock::now() + kHangupGrace, 0});
}

void Agent::RunHangups(Clock::time_point now) {
  for (auto it = hangups_.begin(); it != hangups_.end();) {
    if (now < it->kill_at) {
      ++it;
      continue;
    }
    // Repeated until the session is empty: a member may fork between the
    // scan and the kill (zombies not reaped yet also still show up).
    auto members = SessionMembers(it->sid);
    for (pid_t pid : members) kill(pid, SIGKILL);
    if (!members.empty() && ++it->kill_passes < kMaxKillPasses) {
      it->kill_at = now + kKillRetry;
      ++it;
      continue;
    }
    it = hangups_.erase(it);
  }
}

}  // namespace hutch::agent
