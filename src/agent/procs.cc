// Background processes (docs/wire.md "Background processes"): the table of
// kProcStart processes, their output rings, and the attach streams that
// follow them. A process here belongs to no connection: it runs, and its
// output is read into its ring, whether or not anyone is attached, so a
// restarted hutchd finds it (and its recent output) where it left it.
#include <signal.h>

#include <algorithm>

#include "agent/agent.h"
#include "agent/log.h"

namespace hutch::agent {

using nlohmann::json;
using wire::Type;

namespace {

// Output retained per process unless kProcStart asks otherwise.
constexpr size_t kDefaultBuffer = 1 << 20;
// Ended processes stay listed, with their output, until this many newer
// ones ended; running ones are capped too. Together they bound the agent's
// memory for rings at (kMaxRunning + kMaxFinished) * buffer.
constexpr size_t kMaxFinished = 64;
constexpr size_t kMaxRunning = 64;
// kProcStdin bytes the process has not read yet, at most.
constexpr size_t kMaxPendingStdin = 1 << 20;

Result<json> ParseObject(std::string_view payload) {
  try {
    json j = json::parse(payload);
    if (!j.is_object()) return MakeError(Code::kInvalidRequest, "request is not an object");
    return j;
  } catch (const json::exception& e) {
    return MakeError(Code::kInvalidRequest, std::string("bad request: ") + e.what());
  }
}

Result<pid_t> PidField(const json& j) {
  auto it = j.find("pid");
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0 ||
      it->get<int64_t>() > INT32_MAX)
    return MakeError(Code::kInvalidRequest, "'pid' must be a positive integer");
  return static_cast<pid_t>(it->get<int64_t>());
}

Error NotFound(pid_t pid) {
  return MakeError(Code::kProcessNotFound, "no process with pid " + std::to_string(pid));
}

}  // namespace

void Agent::OnProcRequest(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  switch (f.type) {
    case Type::kProcStart:
      return StartProc(c, f);
    case Type::kProcAttach:
      return AttachProc(c, f);
    case Type::kProcStdin:
      return ProcStdin(c, f);
    case Type::kProcSignal:
      return ProcSignal(c, f);
    case Type::kProcList: {
      std::vector<json> list;
      for (const auto& [pid, p] : procs_) list.push_back(ProcJson(*p));
      for (const auto& [id, e] : execs_)
        if (!e->background && !e->done) list.push_back(ForegroundJson(*e));
      std::stable_sort(list.begin(), list.end(), [](const json& a, const json& b) {
        return a["started_unix_ms"].get<int64_t>() < b["started_unix_ms"].get<int64_t>();
      });
      return SendJson(c, Type::kProcResult, s, {{"processes", list}});
    }
    case Type::kProcStatus: {
      auto j = ParseObject(f.payload);
      if (!j.ok()) return SendError(c, s, j.error());
      auto pid = PidField(*j);
      if (!pid.ok()) return SendError(c, s, pid.error());
      if (Proc* p = FindProc(*pid)) return SendJson(c, Type::kProcResult, s, ProcJson(*p));
      if (Exec* e = FindForeground(*pid))
        return SendJson(c, Type::kProcResult, s, ForegroundJson(*e));
      return SendError(c, s, NotFound(*pid));
    }
    default:
      return;
  }
}

void Agent::StartProc(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  auto req = ParseExecRequest(f.payload);
  if (!req.ok()) return SendError(c, s, req.error());
  if (RunningProcs() >= kMaxRunning)
    return SendError(c, s,
                     MakeError(Code::kConflict, "too many background processes running (at most " +
                                                    std::to_string(kMaxRunning) + ")"));
  if (req->stdin_data) req->spawn.stdin_pipe = true;
  auto sp = Spawn(req->spawn);
  if (!sp.ok()) {
    Log("spawn: " + sp.error().message);
    return SendError(c, s, sp.error());
  }
  // A pid the kernel handed out again replaces the entry of its ended
  // predecessor.
  if (procs_.count(sp->pid)) EraseProc(sp->pid, "its pid was reused by a new process");

  auto e = std::make_unique<Exec>();
  e->id = next_id_++;
  e->pid = sp->pid;
  e->detach = true;
  e->background = true;
  e->credit = kUnlimitedCredit;
  e->out = std::move(sp->stdout_r);
  e->err = std::move(sp->stderr_r);
  e->in = std::move(sp->stdin_w);
  e->argv = req->spawn.argv;
  e->user = req->user;
  e->cwd = req->spawn.cwd;
  e->started_unix_ms = UnixMillisNow();
  e->start = e->last_progress = Clock::now();
  if (req->timeout_ms > 0) e->deadline = e->start + std::chrono::milliseconds(req->timeout_ms);
  if (req->stdin_data) {
    e->stdin_buf = std::move(*req->stdin_data);
    e->stdin_close = true;
  }

  auto p = std::make_unique<Proc>(req->buffer_bytes ? req->buffer_bytes : kDefaultBuffer);
  p->pid = e->pid;
  p->exec_id = e->id;
  p->argv = e->argv;
  p->user = e->user;
  p->cwd = e->cwd;
  p->meta = req->meta.is_object() ? req->meta : json::object();
  p->started_unix_ms = e->started_unix_ms;

  Exec& ex = *e;
  pid_to_exec_[e->pid] = e->id;
  execs_[e->id] = std::move(e);
  Proc& pr = *p;
  procs_[pr.pid] = std::move(p);
  SendJson(c, Type::kProcResult, s, ProcJson(pr));
  PumpStdin(ex);  // also sets up the epoll watches
}

void Agent::AttachProc(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  auto j = ParseObject(f.payload);
  if (!j.ok()) return SendError(c, s, j.error());
  auto pid = PidField(*j);
  if (!pid.ok()) return SendError(c, s, pid.error());
  uint64_t from = 0;
  if (auto it = j->find("from"); it != j->end() && !it->is_null()) {
    if (!it->is_number_unsigned())
      return SendError(c, s, MakeError(Code::kInvalidRequest, "'from' must be >= 0"));
    from = it->get<uint64_t>();
  }
  Proc* p = FindProc(*pid);
  if (p == nullptr) {
    if (FindForeground(*pid))
      return SendError(
          c, s,
          MakeError(Code::kConflict, "process " + std::to_string(*pid) +
                                         " is not a background process (no retained output)"));
    return SendError(c, s, NotFound(*pid));
  }
  if (from > p->ring.end())
    return SendError(c, s,
                     MakeError(Code::kInvalidRequest,
                               "from " + std::to_string(from) + " is past the end of the output (" +
                                   std::to_string(p->ring.end()) + " bytes)"));
  SendJson(c, Type::kStarted, s, ProcJson(*p));
  c.attaches[s] = p->pid;
  Follower& fl = p->followers[{c.id, s}];
  fl.conn = c.id;
  fl.stream = s;
  fl.pos = from;
  PumpFollowers(*p);
}

void Agent::OnAttachFrame(Connection& c, uint32_t stream, const wire::Frame& f) {
  if (f.type == Type::kCancel) return DropFollower(c, stream);
  if (f.type != Type::kCredit) return;
  Proc* p = FindProc(c.attaches[stream]);
  if (p == nullptr) return;
  auto it = p->followers.find({c.id, stream});
  if (it == p->followers.end()) return;
  it->second.credit += wire::DecodeCredit(f.payload);
  PumpFollowers(*p);
}

void Agent::ProcStdin(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  wire::ProcStdin in;
  if (!wire::DecodeProcStdin(f.payload, &in))
    return SendError(c, s, MakeError(Code::kInvalidRequest, "malformed stdin request"));
  const auto pid = static_cast<pid_t>(in.pid);
  Proc* p = FindProc(pid);
  if (p == nullptr) {
    if (FindForeground(pid))
      return SendError(c, s,
                       MakeError(Code::kConflict, "process " + std::to_string(pid) +
                                                      " is not a background process; its stdin "
                                                      "belongs to the request that started it"));
    return SendError(c, s, NotFound(pid));
  }
  auto ex = p->running ? execs_.find(p->exec_id) : execs_.end();
  if (ex == execs_.end())
    return SendError(c, s,
                     MakeError(Code::kConflict, "process " + std::to_string(pid) + " has exited"));
  Exec& e = *ex->second;
  const bool open = e.in.valid() && !e.stdin_close;
  if (!open) {
    // Closing what is already closed is no error; writing to it is.
    if (in.close && in.bytes.empty()) return SendJson(c, Type::kProcResult, s, ProcJson(*p));
    return SendError(
        c, s, MakeError(Code::kConflict, "stdin of process " + std::to_string(pid) + " is closed"));
  }
  if (e.stdin_buf.size() + in.bytes.size() > kMaxPendingStdin)
    return SendError(
        c, s,
        MakeError(Code::kConflict, "stdin of process " + std::to_string(pid) +
                                       " is full: the process is not reading its input"));
  e.stdin_buf.append(in.bytes);
  if (in.close) e.stdin_close = true;
  PumpStdin(e);
  SendJson(c, Type::kProcResult, s, ProcJson(*p));
}

void Agent::ProcSignal(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  auto j = ParseObject(f.payload);
  if (!j.ok()) return SendError(c, s, j.error());
  auto pid = PidField(*j);
  if (!pid.ok()) return SendError(c, s, pid.error());
  auto sig_it = j->find("signal");
  if (sig_it == j->end() || !sig_it->is_number_integer() || sig_it->get<int64_t>() <= 0 ||
      sig_it->get<int64_t>() >= NSIG)
    return SendError(c, s, MakeError(Code::kInvalidRequest, "'signal' must be a signal number"));
  const int sig = static_cast<int>(sig_it->get<int64_t>());
  if (Proc* p = FindProc(*pid)) {
    auto ex = p->running ? execs_.find(p->exec_id) : execs_.end();
    if (ex == execs_.end())
      return SendError(
          c, s,
          MakeError(Code::kConflict, "process " + std::to_string(*pid) + " has already exited"));
    SignalGroup(*ex->second, sig);
    return SendJson(c, Type::kProcResult, s, ProcJson(*p));
  }
  if (Exec* e = FindForeground(*pid)) {
    SignalGroup(*e, sig);
    return SendJson(c, Type::kProcResult, s, ForegroundJson(*e));
  }
  SendError(c, s, NotFound(*pid));
}

void Agent::ProcOutput(Exec& e, bool is_err, std::string_view data) {
  Proc* p = FindProc(e.pid);
  if (p == nullptr || p->exec_id != e.id) return;
  p->ring.Append(is_err, data);
  PumpFollowers(*p);
}

void Agent::ProcFinished(Exec& e) {
  Proc* p = FindProc(e.pid);
  if (p == nullptr || p->exec_id != e.id) return;
  p->running = false;
  p->exec_id = 0;
  p->status = e.status;
  p->timed_out = e.timed_out;
  p->duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(e.exit_time - e.start).count();
  p->ended_unix_ms = p->started_unix_ms + p->duration_ms;
  p->finish_seq = ++finish_seq_;
  PumpFollowers(*p);
  EvictFinished();
}

void Agent::PumpFollowers(Proc& p) {
  for (auto it = p.followers.begin(); it != p.followers.end();) {
    if (!PumpFollower(p, it->second)) {
      ++it;
      continue;
    }
    if (auto c = conns_.find(it->second.conn); c != conns_.end())
      c->second->attaches.erase(it->second.stream);
    it = p.followers.erase(it);
  }
}

bool Agent::PumpFollower(Proc& p, Follower& f) {
  Connection* c = LiveConn(f.conn);
  if (c == nullptr) return true;
  while (f.credit > 0) {
    if (f.pos < p.ring.oldest()) {
      // The follower fell behind the ring (or asked for bytes already
      // dropped): say how much it missed, then go on from the oldest byte.
      const uint64_t oldest = p.ring.oldest();
      SendJson(*c, Type::kProcDropped, f.stream,
               {{"from", f.pos}, {"oldest", oldest}, {"dropped_bytes", oldest - f.pos}});
      f.pos = oldest;
    }
    auto piece = p.ring.Read(f.pos, static_cast<size_t>(std::min<int64_t>(f.credit, wire::kChunk)));
    if (piece.bytes.empty()) break;
    Send(*c, piece.is_err ? Type::kStderr : Type::kStdout, f.stream, piece.bytes);
    f.credit -= static_cast<int64_t>(piece.bytes.size());
    f.pos += piece.bytes.size();
  }
  if (p.running || f.pos < p.ring.end()) return false;
  SendJson(*c, Type::kExit, f.stream, ExitJson(p.status, p.timed_out, p.duration_ms, serial()));
  return true;
}

void Agent::DropFollower(Connection& c, uint32_t stream) {
  auto it = c.attaches.find(stream);
  if (it == c.attaches.end()) return;
  if (Proc* p = FindProc(it->second)) p->followers.erase({c.id, stream});
  c.attaches.erase(it);
}

void Agent::EraseProc(pid_t pid, const std::string& why) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  for (auto& [key, f] : it->second->followers) {
    auto c = conns_.find(f.conn);
    if (c == conns_.end()) continue;
    c->second->attaches.erase(f.stream);
    SendError(*c->second, f.stream,
              MakeError(Code::kProcessNotFound,
                        "process " + std::to_string(pid) + " was forgotten: " + why));
  }
  procs_.erase(it);
}

void Agent::EvictFinished() {
  for (;;) {
    size_t finished = 0;
    const Proc* oldest = nullptr;
    for (const auto& [pid, p] : procs_) {
      if (p->running) continue;
      ++finished;
      if (oldest == nullptr || p->finish_seq < oldest->finish_seq) oldest = p.get();
    }
    if (finished <= kMaxFinished || oldest == nullptr) return;
    EraseProc(oldest->pid, "more than " + std::to_string(kMaxFinished) + " newer processes ended");
  }
}

json Agent::ProcJson(const Proc& p) const {
  auto ex = p.running ? execs_.find(p.exec_id) : execs_.end();
  const bool stdin_open = ex != execs_.end() && ex->second->in.valid() && !ex->second->stdin_close;
  json j = {{"pid", p.pid},
            {"argv", p.argv},
            {"user", p.user},
            {"cwd", p.cwd},
            {"meta", p.meta},
            {"background", true},
            {"pty", false},
            {"running", p.running},
            {"started_unix_ms", p.started_unix_ms},
            {"stdin_open", stdin_open},
            {"output_end", p.ring.end()},
            {"output_oldest", p.ring.oldest()}};
  if (!p.running) {
    j["exit"] = ExitJson(p.status, p.timed_out, p.duration_ms, serial());
    j["ended_unix_ms"] = p.ended_unix_ms;
  }
  return j;
}

json Agent::ForegroundJson(const Exec& e) const {
  json j = {{"pid", e.pid},       {"argv", e.argv},         {"user", e.user},
            {"cwd", e.cwd},       {"meta", json::object()}, {"background", false},
            {"pty", e.pty},       {"running", !e.exited},   {"started_unix_ms", e.started_unix_ms},
            {"stdin_open", false}};
  if (e.exited) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(e.exit_time - e.start).count();
    j["exit"] = ExitJson(e.status, e.timed_out, ms, serial());
    j["ended_unix_ms"] = e.started_unix_ms + ms;
  }
  return j;
}

Proc* Agent::FindProc(pid_t pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : it->second.get();
}

Exec* Agent::FindForeground(pid_t pid) {
  for (auto& [id, e] : execs_)
    if (e->pid == pid && !e->background && !e->done) return e.get();
  return nullptr;
}

size_t Agent::RunningProcs() const {
  size_t n = 0;
  for (const auto& [pid, p] : procs_) n += p->running ? 1 : 0;
  return n;
}

}  // namespace hutch::agent
