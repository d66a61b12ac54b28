#include "core/exec_session.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "core/sandbox_events.h"
#include "driver/agent_connection.h"

namespace hutch {

namespace {

Error ParseAgentError(const std::string& payload) {
  try {
    auto j = nlohmann::json::parse(payload);
    std::string code = j.value("code", "internal");
    std::string msg = j.value("message", "agent error");
    Code c = Code::kInternal;
    if (code == "invalid_request") c = Code::kInvalidRequest;
    else if (code == "file_not_found") c = Code::kFileNotFound;
    else if (code == "not_a_directory") c = Code::kNotADirectory;
    else if (code == "is_a_directory") c = Code::kIsADirectory;
    else if (code == "permission_denied") c = Code::kPermissionDenied;
    else if (code == "conflict") c = Code::kConflict;
    else if (code == "no_space") c = Code::kNoSpace;
    else if (code == "sandbox_resource_exhausted") c = Code::kSandboxResourceExhausted;
    else if (code == "process_not_found") c = Code::kProcessNotFound;
    return Error{c, j.value("errno", 0), msg};
  } catch (const std::exception& e) {
    return MakeError(Code::kInternal, std::string("malformed agent error: ") + e.what());
  }
}

Error LostError() { return MakeError(Code::kUnavailable, "sandbox agent connection lost"); }

}  // namespace

Error AgentErrorFromPayload(const std::string& payload) { return ParseAgentError(payload); }

Error StreamEndedError(const Sandbox& sb, bool interrupted) {
  if (interrupted) return MakeError(Code::kUnavailable, "client went away");
  if (sb.rec.status == SandboxStatus::kStopped && sb.rec.reason == "expired")
    // The reaper deleted the sandbox under a running command: say so.
    return MakeError(Code::kSandboxExpired,
                     "sandbox " + sb.rec.id + " expired (ttl) while the command ran");
  if (sb.rec.status == SandboxStatus::kStopped)
    return MakeError(
        Code::kSandboxNotRunning,
        "sandbox " + sb.rec.id + " stopped while the command ran (" + sb.rec.reason + ")");
  return LostError();
}

bool LooksOomKilled(const ExitInfo& e, const Sandbox& sb, uint64_t oom_kills_before) {
  // The kernel's OOM killer sends SIGKILL; the cgroup counter tells it
  // apart from a kill by the timeout or by the user. A shell running the
  // command (`cmd` is `sh -c`) may outlive its killed child and exit 137
  // itself, so both forms count.
  auto inst = sb.instance;
  return inst && (e.signal == 9 || e.exit_code == 137) && !e.timed_out &&
         inst->OomKills() > oom_kills_before;
}

Result<ExitInfo> ParseExitFrame(const std::string& payload, const Sandbox& sb,
                                uint64_t oom_kills_before) {
  ExitInfo e;
  try {
    auto j = nlohmann::json::parse(payload);
    e.exit_code = j.value("exit_code", -1);
    e.signal = j.value("signal", 0);
    e.timed_out = j.value("timed_out", false);
    e.duration_ms = j.value("duration_ms", int64_t{0});
    if (auto n = j.find("oom_kills"); n != j.end() && n->is_number_unsigned() && sb.instance)
      sb.instance->NoteAgentOomKills(n->get<uint64_t>());
  } catch (const std::exception&) {
    return MakeError(Code::kInternal, "malformed agent exit frame");
  }
  e.oom_killed = LooksOomKilled(e, sb, oom_kills_before);
  return e;
}

asio::awaitable<Result<std::unique_ptr<ExecSession>>> ExecSession::Start(
    std::shared_ptr<Sandbox> sb, ExecRequest req) {
  if (req.argv.empty() || req.argv[0].empty())
    co_return MakeError(Code::kInvalidRequest, "empty command");
  auto inst = sb->instance;
  if (!inst || !inst->agent() || !inst->agent()->alive())
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + sb->rec.id + " is not running");
  auto stream = inst->agent()->OpenStream();
  std::unique_ptr<ExecSession> s(new ExecSession(sb, stream));
  s->oom_before_ = inst->OomKills();
  const int64_t timeout_ms = req.timeout_ms.value_or(req.timeout_seconds * 1000);
  if (timeout_ms > 0)
    s->deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms) +
                   AgentConnection::answer_timeout();
  // Sandbox-level env first, request env overrides it.
  std::map<std::string, std::string> env = sb->rec.env;
  for (const auto& [k, v] : req.env) env[k] = v;
  nlohmann::json spec = {
      {"argv", req.argv},         {"env", env},
      {"timeout_ms", timeout_ms}, {"stdin", req.stdin_data.has_value()},
      {"detach", req.detach},
  };
  // The template's defaults stand in for what the request leaves out.
  const std::string& cwd = req.cwd.empty() ? sb->rec.workdir : req.cwd;
  const std::string& user = req.user.empty() ? sb->rec.user : req.user;
  if (!cwd.empty()) spec["cwd"] = cwd;
  if (!user.empty()) spec["user"] = user;
  if (auto st = co_await stream->Send(
          wire::Type::kExecStart,
          spec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      !st.ok())
    co_return st.error();
  if (req.stdin_data) {
    // Chunked so no frame exceeds the protocol's payload limit.
    const std::string& in = *req.stdin_data;
    for (size_t off = 0; off < in.size(); off += wire::kChunk) {
      if (auto st = co_await stream->Send(wire::Type::kStdin,
                                          std::string_view(in).substr(off, wire::kChunk));
          !st.ok())
        co_return st.error();
    }
    if (auto st = co_await stream->Send(wire::Type::kStdinClose, {}); !st.ok())
      co_return st.error();
  }
  auto answer = co_await stream->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& f = *answer;
  if (!f) co_return LostError();
  if (f->type == wire::Type::kError) co_return ParseAgentError(f->payload);
  if (f->type != wire::Type::kStarted)
    co_return MakeError(Code::kInternal, "agent answered exec with an unexpected frame");
  try {
    s->pid_ = nlohmann::json::parse(f->payload).value("pid", 0);
  } catch (const std::exception&) {
    co_return MakeError(Code::kInternal, "malformed agent start frame");
  }
  s->command_ = CommandLine(req.argv);
  NoteExecStarted(*sb, s->pid_, s->command_);
  co_return std::move(s);
}

void ExecSession::Detach() {
  stream_->DetachFromAgent();
  // Nobody reads its output any more: let the agent send freely so the
  // process never blocks on a full pipe. (Frames are dropped on arrival.)
  stream_->Unlimited();
}

asio::awaitable<ExecEvent> ExecSession::Next() {
  if (done_) {
    ExecEvent ev;
    ev.error = MakeError(Code::kInternal, "exec stream already ended");
    co_return ev;
  }
  while (true) {
    auto ev = co_await NextFor(std::chrono::milliseconds::max());
    if (ev) co_return std::move(*ev);
  }
}

asio::awaitable<std::optional<ExecEvent>> ExecSession::NextFor(std::chrono::milliseconds timeout) {
  if (done_) co_return co_await Next();
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline_) co_return Overdue();
  // Waits no longer than the deadline (`timeout` may be max(): no overflow).
  if (deadline_ != std::chrono::steady_clock::time_point::max())
    timeout = std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now));
  bool timed_out = false;
  auto f = co_await stream_->NextFor(timeout, &timed_out);
  if (timed_out) {
    if (std::chrono::steady_clock::now() >= deadline_) co_return Overdue();
    co_return std::nullopt;
  }
  co_return Convert(std::move(f));
}

ExecEvent ExecSession::Overdue() {
  done_ = true;
  ExecEvent ev;
  ev.kind = ExecEvent::kError;
  ev.error = AgentConnection::AnswerTimeoutError("end the command", " of its timeout");
  return ev;
}

ExecEvent ExecSession::Convert(std::optional<wire::Frame> f) {
  ExecEvent ev;
  if (!f) {
    done_ = true;
    ev.kind = ExecEvent::kError;
    ev.error = StreamEndedError(*sb_, stream_->interrupted());
    return ev;
  }
  switch (f->type) {
    case wire::Type::kStdout:
      ev.kind = ExecEvent::kStdout;
      ev.data = std::move(f->payload);
      break;
    case wire::Type::kStderr:
      ev.kind = ExecEvent::kStderr;
      ev.data = std::move(f->payload);
      break;
    case wire::Type::kExit: {
      done_ = true;
      auto exit = ParseExitFrame(f->payload, *sb_, oom_before_);
      if (!exit.ok()) {
        ev.kind = ExecEvent::kError;
        ev.error = exit.error();
        break;
      }
      ev.kind = ExecEvent::kExit;
      ev.exit = *exit;
      NoteProcessExited(*sb_, pid_, command_, ev.exit, false);
      break;
    }
    case wire::Type::kError:
      done_ = true;
      ev.kind = ExecEvent::kError;
      ev.error = ParseAgentError(f->payload);
      break;
    default:
      done_ = true;
      ev.kind = ExecEvent::kError;
      ev.error = MakeError(Code::kInternal, "unexpected frame from agent");
  }
  return ev;
}

asio::awaitable<Result<ExecResult>> RunExec(std::shared_ptr<Sandbox> sb, ExecRequest req,
                                            size_t output_cap) {
  auto s = co_await ExecSession::Start(sb, std::move(req));
  if (!s.ok()) co_return s.error();
  ExecResult r;
  while (true) {
    ExecEvent ev = co_await (*s)->Next();
    if (ev.kind == ExecEvent::kExit) {
      r.exit = ev.exit;
      co_return r;
    }
    if (ev.kind == ExecEvent::kError) co_return ev.error;
    std::string& dst = ev.kind == ExecEvent::kStdout ? r.stdout_data : r.stderr_data;
    size_t room = dst.size() < output_cap ? output_cap - dst.size() : 0;
    if (ev.data.size() > room) r.truncated = true;
    dst.append(ev.data, 0, std::min(room, ev.data.size()));
    (*s)->Consumed(ev.data.size());
  }
}

}  // namespace hutch
