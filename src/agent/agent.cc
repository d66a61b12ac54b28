#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "agent/log.h"

namespace hutch::agent {

using nlohmann::json;
using wire::Type;

namespace {
constexpr uint64_t kIdMask = (uint64_t{1} << 56) - 1;
// Socket bytes read per readiness event before other fds get a turn.
constexpr int kMaxReadsPerEvent = 16;
}  // namespace

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status Agent::Init() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) return ErrnoError("epoll_create1");
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigfd_.reset(signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sigfd_) return ErrnoError("signalfd");
  if (!serial()) {
    int fl = fcntl(listener_.get(), F_GETFL);
    if (fl < 0 || fcntl(listener_.get(), F_SETFL, fl | O_NONBLOCK) < 0)
      return ErrnoError("listener O_NONBLOCK");
    Watch(listener_.get(), Token(kListenTok, 0), EPOLLIN, &listener_watched_, true);
  }
  bool w = false;
  Watch(sigfd_.get(), Token(kSignalTok, 0), EPOLLIN, &w, true);
  // Children that exited before the signalfd existed.
  Reap();
  return {};
}

void Agent::Watch(int fd, uint64_t token, uint32_t events, bool* watched, bool want) {
  if (*watched == want) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (epoll_ctl(epoll_.get(), want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) < 0) {
    Log(std::string("epoll_ctl: ") + std::strerror(errno));
    return;
  }
  *watched = want;
}

void Agent::Run() {
  epoll_event evs[64];
  for (;;) {
    if (serial()) OpenSerial(Clock::now());
    int n = epoll_wait(epoll_.get(), evs, 64, NextTimeoutMs());
    if (n < 0 && errno != EINTR) Log(std::string("epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      const uint64_t kind = evs[i].data.u64 >> 56;
      const uint64_t id = evs[i].data.u64 & kIdMask;
      switch (kind) {
        case kListenTok:
          Accept();
          break;
        case kSignalTok:
          Reap();
          break;
        case kConnTok:
          if (Connection* c = LiveConn(id)) OnConnEvent(*c, evs[i].events);
          break;
        case kStdoutTok:
        case kStderrTok:
        case kStdinTok:
          OnExecPipe(id, static_cast<int>(kind));
          break;
        default:
          break;
      }
    }
    RunTimers(Clock::now());
    for (auto& [id, c] : conns_)
      if (!c->dead) PumpReads(*c);
    Sweep();
  }
}

int Agent::NextTimeoutMs() {
  for (auto& [id, c] : conns_)
    for (auto& [s, r] : c->reads)
      if (r.remaining == 0 || r.credit > 0) return 0;
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (auto& [id, e] : execs_) {
    if (e->done) continue;
    if (e->deadline) consider(*e->deadline);
    if (e->exited && e->credit > 0) consider(e->last_progress + std::chrono::milliseconds(200));
  }
  for (const auto& h : hangups_) consider(h.kill_at);
  if (serial() && serial_conn_ == 0) consider(serial_retry_at_);
  if (!next) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count();
  // Round up so we do not wake just before the deadline and spin.
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 60000));
}

void Agent::Accept() {
  for (;;) {
    int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Log(std::string("accept: ") + std::strerror(errno));
      // Out of fds: the pending connection keeps the listener readable, so
      // stop watching it until a connection closes instead of spinning.
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
        Watch(listener_.get(), Token(kListenTok, 0), EPOLLIN, &listener_watched_, false);
      return;
    }
    AddConnection(UniqueFd(fd));
  }
}

uint64_t Agent::AddConnection(UniqueFd fd) {
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  bool w = false;
  Watch(fd.get(), Token(kConnTok, c->id), EPOLLIN, &w, true);
  c->fd = std::move(fd);
  Connection& ref = *c;
  conns_[c->id] = std::move(c);
  // "features" lets a newer hutchd that adopted this sandbox know which
  // requests this agent understands (unknown frame types drop a connection).
  SendJson(ref, Type::kHello, 0,
           {{"version", wire::kProtocolVersion},
            {"pid", getpid()},
            {"features", {"processes", "pty", "identify"}}});
  return ref.id;
}

Connection* Agent::LiveConn(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() || it->second->dead ? nullptr : it->second.get();
}

bool Agent::StreamLive(const Connection& c, uint32_t stream) const {
  return c.execs.count(stream) || c.reads.count(stream) || c.writes.count(stream) ||
         c.attaches.count(stream);
}

void Agent::OnConnEvent(Connection& c, uint32_t events) {
  if (events & EPOLLOUT) Flush(c);
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  char buf[64 * 1024];
  for (int i = 0; i < kMaxReadsPerEvent && !c.dead; ++i) {
    ssize_t n = read(c.fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      return;
    }
    if (n == 0) {
      c.dead = true;
      return;
    }
    Status st = c.reader.Feed(buf, static_cast<size_t>(n));
    if (!st.ok()) {
      // A framing error means we can no longer find frame boundaries.
      Log("connection " + std::to_string(c.id) + " dropped: " + st.error().message);
      c.dead = true;
      return;
    }
    wire::Frame f;
    while (!c.dead && c.reader.Next(&f)) OnFrame(c, f);
  }
}

namespace {
bool IsRequest(Type t) {
  switch (t) {
    case Type::kExecStart:
    case Type::kFsRequest:
    case Type::kProcStart:
    case Type::kProcList:
    case Type::kProcStatus:
    case Type::kProcAttach:
    case Type::kProcStdin:
    case Type::kProcSignal:
    case Type::kPtyStart:
    case Type::kIdentify:
      return true;
    default:
      return false;
  }
}
}  // namespace

void Agent::OnFrame(Connection& c, wire::Frame& f) {
  if (IsRequest(f.type)) {
    if (f.stream == 0 || StreamLive(c, f.stream)) {
      Log("ignoring request on stream " + std::to_string(f.stream) + " (stream 0 or already live)");
      return;
    }
    if (f.type == Type::kExecStart) StartExec(c, f);
    else if (f.type == Type::kFsRequest) StartFs(c, f);
    else if (f.type == Type::kPtyStart) StartPty(c, f);
    else if (f.type == Type::kIdentify) Identify(c, f);
    else OnProcRequest(c, f);
    return;
  }
  if (c.attaches.count(f.stream)) {
    OnAttachFrame(c, f.stream, f);
  } else if (auto it = c.execs.find(f.stream); it != c.execs.end()) {
    if (auto e = execs_.find(it->second); e != execs_.end()) OnExecFrame(*e->second, f);
  } else if (c.reads.count(f.stream)) {
    OnReadFrame(c, f.stream, f);
  } else if (c.writes.count(f.stream)) {
    OnWriteFrame(c, f.stream, f);
  }
  // Anything else is for a stream that already ended: ignored by design.
}

void Agent::Send(Connection& c, Type type, uint32_t stream, std::string_view payload) {
  if (c.dead) return;
  // hutchd drops a connection that sends it a frame over the limit, and
  // with it the sandbox (issue 32): an answer too big for one frame (a
  // listing of thousands of long names) ends its own stream with an error.
  if (payload.size() > wire::kMaxPayload) {
    const std::string msg =
        "the answer of " + std::to_string(payload.size()) +
        " bytes exceeds the 1 MiB limit of one message from the sandbox (ask for less: a "
        "smaller directory or depth)";
    c.out += wire::Encode(Type::kError, stream,
                          DumpJson({{"code", "invalid_request"}, {"errno", 0}, {"message", msg}}));
    Flush(c);
    return;
  }
  c.out += wire::Encode(type, stream, payload);
  Flush(c);
}

void Agent::SendJson(Connection& c, Type type, uint32_t stream, const json& j) {
  Send(c, type, stream, DumpJson(j));
}

void Agent::SendError(Connection& c, uint32_t stream, const std::string& code, int err,
                      const std::string& msg) {
  SendJson(c, Type::kError, stream, {{"code", code}, {"errno", err}, {"message", msg}});
}

void Agent::SendError(Connection& c, uint32_t stream, const Error& e) {
  SendError(c, stream, CodeName(e.code), e.err, e.message);
}

void Agent::Flush(Connection& c) {
  while (!c.dead && c.out_pos < c.out.size()) {
    // write(), not send(): a serial port is no socket. Both kinds are
    // O_NONBLOCK, and SIGPIPE is ignored (main).
    ssize_t n = write(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
      break;
    }
    c.out_pos += static_cast<size_t>(n);
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  } else if (c.out_pos > (1u << 20)) {
    c.out.erase(0, c.out_pos);
    c.out_pos = 0;
  }
  if (c.dead) return;
  const bool want_out = !c.out.empty();
  if (want_out != c.out_watched) {
    epoll_event ev{};
    ev.events = want_out ? (EPOLLIN | EPOLLOUT) : static_cast<uint32_t>(EPOLLIN);
    ev.data.u64 = Token(kConnTok, c.id);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) == 0) c.out_watched = want_out;
  }
}

void Agent::Sweep() {
  bool freed = false;  // fds were released: accepting may work again
  for (auto it = conns_.begin(); it != conns_.end();) {
    Connection& c = *it->second;
    if (!c.dead) {
      ++it;
      continue;
    }
    for (auto& [stream, exec_id] : c.execs) {
      auto e = execs_.find(exec_id);
      if (e == execs_.end()) continue;
      // The main process may be gone while its background children still
      // hold the pipes: they are part of the same group.
      if (!e->second->detach) AbandonExec(*e->second);
      OrphanExec(*e->second);
    }
    // Followers only stop following: background processes run on.
    while (!c.attaches.empty()) DropFollower(c, c.attaches.begin()->first);
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    if (c.id == serial_conn_) serial_conn_ = 0;
    it = conns_.erase(it);  // closes the socket; temp files of writes are unlinked
    freed = true;
  }
  for (auto it = execs_.begin(); it != execs_.end();) {
    freed = freed || it->second->done;
    it = it->second->done ? execs_.erase(it) : std::next(it);
  }
  if (freed && !serial())
    Watch(listener_.get(), Token(kListenTok, 0), EPOLLIN, &listener_watched_, true);
}

}  // namespace hutch::agent
