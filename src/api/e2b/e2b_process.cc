// envd's process.Process over hutch's core: commands run as background
// processes (core/process_ops: agent-held, with an output ring), so a
// stream that disconnects can be re-attached with Connect and the command
// runs on; terminals are PtySessions, whose keystrokes and resizes arrive
// on SendInput / Update while their Start stream is open.
#include <signal.h>
#include <string.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "api/e2b/connect_stream.h"
#include "api/e2b/e2b_api.h"
#include "core/process_ops.h"
#include "http/close_interrupts.h"

namespace hutch::api::e2b {

namespace {

Json Event(const char* kind, Json value) { return Json{{"event", Json{{kind, std::move(value)}}}}; }

Json DataEvent(const char* stream, std::string_view bytes) {
  return Event("data", Json{{stream, PjBase64(bytes)}});
}

// The EndEvent as envd (Go's os.ProcessState) words it: a signalled
// process has exit code -1, exited=false, status "signal: killed".
Json EndEvent(const ExitInfo& e) {
  Json end = Json::object();
  if (e.signal) {
    end["exitCode"] = -1;
    std::string name = strsignal(e.signal);
    if (!name.empty())
      name[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
    end["status"] = "signal: " + name;
  } else {
    if (e.exit_code != 0) end["exitCode"] = e.exit_code;
    end["exited"] = true;
    end["status"] = "exit status " + std::to_string(e.exit_code);
  }
  return Event("end", end);
}

Result<int> SelectedPid(const Json& req) {
  auto sel = PjMessage(req, "process");
  if (!sel.ok()) return sel.error();
  if (sel->contains("tag") && !(*sel)["tag"].is_null())
    return MakeError(Code::kNotSupported,
                     "selecting a process by tag is not supported by hutch; use its pid");
  auto pid = PjUint32(*sel, "pid");
  if (!pid.ok()) return pid.error();
  if (*pid == 0 || *pid > INT32_MAX)
    return MakeError(Code::kInvalidRequest, "'process.pid' is required");
  return static_cast<int>(*pid);
}

// An operation on a process that has ended is "not found" to E2B; another
// conflict (stdin already closed) is a failed precondition.
asio::awaitable<Error> ExplainConflict(std::shared_ptr<Sandbox> sb, int pid, Error e) {
  if (e.code != Code::kConflict) co_return e;
  auto info = co_await GetProcess(sb, pid);
  if (info.ok() && !info->running)
    co_return MakeError(Code::kProcessNotFound,
                        "process " + std::to_string(pid) + " is not running");
  e.code = Code::kInvalidRequest;
  co_return e;
}

// Follows a background process's output into the stream until it exits,
// the client leaves, or (`deadline`: a Connect call) the call's deadline
// passes. A Start stream has no deadline of its own: its process was given
// the deadline as its timeout, so the agent kills it; the stream then ends
// as connect-go ends a call past its deadline, with `deadline_exceeded`
// (which the SDKs raise as their timeout error), not with an end event.
asio::awaitable<void> Follow(HttpContext& ctx, ConnectStream& out,
                             std::unique_ptr<ProcessFollower> attached, int pid,
                             const EnvdCall& call, bool deadline) {
  std::shared_ptr<ProcessFollower> f = std::move(attached);
  std::weak_ptr<ProcessFollower> weak = f;
  CloseInterrupts interrupt_on_close(ctx, weak);
  const auto start_at = std::chrono::steady_clock::now();
  Json start = Event("start", Json{{"pid", pid}});
  if (!(co_await out.Send(start)).ok()) co_return;
  while (true) {
    auto wait = call.keepalive.count() > 0
                    ? std::chrono::duration_cast<std::chrono::milliseconds>(call.keepalive)
                    : std::chrono::milliseconds(3600 * 1000);
    if (deadline && call.timeout) {
      auto left = *call.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - start_at);
      // The deadline is the client's too: it has given up; end cleanly.
      if (left.count() <= 0) co_return co_await out.End(nullptr);
      wait = std::min(wait, left);
    }
    auto ev = co_await f->NextFor(wait);
    if (!ev) {
      Json keepalive = Event("keepalive", Json::object());
      if (call.keepalive.count() > 0 && !(co_await out.Send(keepalive)).ok()) co_return;
      continue;
    }
    switch (ev->kind) {
      case ProcessEvent::kStdout:
      case ProcessEvent::kStderr: {
        Json d = DataEvent(ev->kind == ProcessEvent::kStdout ? "stdout" : "stderr", ev->data);
        if (!(co_await out.Send(d)).ok()) co_return;
        f->Consumed(ev->data.size());
        break;
      }
      case ProcessEvent::kDropped:
        break;  // envd has no way to say so; the bytes are simply not there
      case ProcessEvent::kExit: {
        if (!deadline && call.timeout && ev->exit.timed_out) {
          Error e = MakeError(Code::kAgentTimeout, "the call's deadline (Connect-Timeout-Ms " +
                                                       std::to_string(call.timeout->count()) +
                                                       ") passed: the command was killed");
          co_return co_await out.End(&e);
        }
        Json end = EndEvent(ev->exit);
        if ((co_await out.Send(end)).ok()) co_await out.End(nullptr);
        co_return;
      }
      case ProcessEvent::kError:
        if (ev->error.message == "client went away") co_return;
        co_return co_await out.End(&ev->error);
    }
  }
}

}  // namespace

asio::awaitable<void> E2bApi::ProcessStart(HttpContext& ctx, EnvdCall& call) {
  ConnectStream out(ctx, call.codec);
  const Json& req = call.request;
  auto proc = PjMessage(req, "process");
  if (!proc.ok()) co_return co_await out.End(&proc.error());
  auto cmd = PjString(*proc, "cmd");
  auto args = PjStringList(*proc, "args");
  auto envs = PjStringMap(*proc, "envs");
  auto cwd = PjString(*proc, "cwd");
  for (const Error* e : {cmd.ok() ? nullptr : &cmd.error(), args.ok() ? nullptr : &args.error(),
                         envs.ok() ? nullptr : &envs.error(), cwd.ok() ? nullptr : &cwd.error()})
    if (e) co_return co_await out.End(e);
  if (cmd->empty()) {
    Error e = MakeError(Code::kInvalidRequest, "'process.cmd' is required");
    co_return co_await out.End(&e);
  }
  std::vector<std::string> argv = {*cmd};
  argv.insert(argv.end(), args->begin(), args->end());
  std::map<std::string, std::string> env(envs->begin(), envs->end());
  if (req.contains("pty") && req["pty"].is_object())
    co_return co_await PtyStart(ctx, call, std::move(argv), std::move(env), *cwd, req["pty"]);

  // envd < 0.3 always had stdin; since then an absent flag still means on.
  bool want_stdin = true;
  if (req.contains("stdin") && !req["stdin"].is_null()) {
    auto s = PjBool(req, "stdin");
    if (!s.ok()) co_return co_await out.End(&s.error());
    want_stdin = *s;
  }
  ExecRequest r;
  r.argv = std::move(argv);
  r.env = std::move(env);
  r.cwd = *cwd;
  r.user = call.user;
  // Connect-Timeout-Ms is the command's lifetime in envd: the agent kills
  // the process group when it expires.
  r.timeout_ms = call.timeout ? call.timeout->count() : 0;
  if (!want_stdin) r.stdin_data = std::string();
  auto info = co_await StartProcess(call.sb, r, std::nullopt);
  if (!info.ok()) co_return co_await out.End(&info.error());
  auto f = co_await ProcessFollower::Attach(call.sb, info->pid, 0);
  if (!f.ok()) co_return co_await out.End(&f.error());
  co_await Follow(ctx, out, std::move(*f), info->pid, call, false);
}

asio::awaitable<void> E2bApi::ProcessConnect(HttpContext& ctx, EnvdCall& call) {
  ConnectStream out(ctx, call.codec);
  auto pid = SelectedPid(call.request);
  if (!pid.ok()) co_return co_await out.End(&pid.error());
  auto info = co_await GetProcess(call.sb, *pid);
  if (!info.ok()) co_return co_await out.End(&info.error());
  if (!info->running) {
    Error e =
        MakeError(Code::kProcessNotFound, "process " + std::to_string(*pid) + " is not running");
    co_return co_await out.End(&e);
  }
  if (!info->background) {
    Error e = MakeError(Code::kNotSupported,
                        "process " + std::to_string(*pid) +
                            (info->pty ? " is a terminal: its output goes only to the stream that "
                                         "created it (pty.connect is not supported by hutch)"
                                       : " was not started through envd"));
    co_return co_await out.End(&e);
  }
  // Like envd: from now on (what it printed before is not replayed).
  auto f = co_await ProcessFollower::Attach(call.sb, *pid, info->output_bytes.value_or(0));
  if (!f.ok()) co_return co_await out.End(&f.error());
  co_await Follow(ctx, out, std::move(*f), *pid, call, true);
}

asio::awaitable<void> E2bApi::PtyStart(HttpContext& ctx, EnvdCall& call,
                                       std::vector<std::string> argv,
                                       std::map<std::string, std::string> env, std::string cwd,
                                       const Json& pty) {
  ConnectStream out(ctx, call.codec);
  auto size = PjMessage(pty, "size");
  if (!size.ok()) co_return co_await out.End(&size.error());
  auto cols = PjUint32(*size, "cols");
  auto rows = PjUint32(*size, "rows");
  if (!cols.ok()) co_return co_await out.End(&cols.error());
  if (!rows.ok()) co_return co_await out.End(&rows.error());
  PtyRequest pr;
  pr.argv = std::move(argv);
  pr.env = std::move(env);
  pr.cwd = std::move(cwd);
  pr.user = call.user;
  if (*cols > 0) pr.cols = static_cast<int>(std::min<uint32_t>(*cols, 10000));
  if (*rows > 0) pr.rows = static_cast<int>(std::min<uint32_t>(*rows, 10000));
  auto started = co_await PtySession::Start(call.sb, pr);
  if (!started.ok()) co_return co_await out.End(&started.error());
  std::shared_ptr<PtySession> s = std::move(*started);
  const int pid = s->pid();
  const std::string key = PtyKey(call.sb->rec.id, pid);
  ptys_[key] = s;
  struct Unregister {
    std::map<std::string, std::weak_ptr<PtySession>>& m;
    std::string key;
    ~Unregister() { m.erase(key); }
  } unregister{ptys_, key};
  std::weak_ptr<PtySession> weak = s;
  CloseInterrupts interrupt_on_close(ctx, weak);
  // The call's deadline ends the terminal (envd's Connect-Timeout-Ms).
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex);
  auto deadline_hit = std::make_shared<bool>(false);
  if (call.timeout) {
    timer->expires_after(*call.timeout);
    timer->async_wait([weak, deadline_hit](boost::system::error_code ec) {
      if (ec) return;
      *deadline_hit = true;
      if (auto p = weak.lock()) p->Interrupt();
    });
  }
  struct CancelTimer {
    std::shared_ptr<asio::steady_timer> t;
    ~CancelTimer() { t->cancel(); }
  } cancel{timer};
  Json start = Event("start", Json{{"pid", pid}});
  if (!(co_await out.Send(start)).ok()) co_return;
  while (true) {
    PtyEvent ev = co_await s->Next();
    if (ev.kind == PtyEvent::kOutput) {
      Json d = DataEvent("pty", ev.data);
      if (!(co_await out.Send(d)).ok()) co_return;
      s->Consumed(ev.data.size());
      continue;
    }
    if (ev.kind == PtyEvent::kExit) {
      Json end = EndEvent(ev.exit);
      if ((co_await out.Send(end)).ok()) co_await out.End(nullptr);
      co_return;
    }
    if (*deadline_hit) co_return co_await out.End(nullptr);
    if (ev.error.message == "client went away") co_return;
    co_return co_await out.End(&ev.error);
  }
}

asio::awaitable<Result<Json>> E2bApi::ProcessUnary(const std::string& method, EnvdCall& call) {
  const Json& req = call.request;
  const Json empty = Json::object();
  if (method == "List") {
    auto list = co_await ListProcesses(call.sb);
    if (!list.ok()) co_return list.error();
    Json procs = Json::array();
    for (const auto& p : *list) {
      if (!p.running || p.argv.empty()) continue;
      Json config = {{"cmd", p.argv[0]}};
      if (p.argv.size() > 1)
        config["args"] = std::vector<std::string>(p.argv.begin() + 1, p.argv.end());
      if (!p.cwd.empty()) config["cwd"] = p.cwd;
      procs.push_back(Json{{"config", config}, {"pid", p.pid}});
    }
    Json outj = Json::object();
    if (!procs.empty()) outj["processes"] = procs;
    co_return outj;
  }
  if (method == "SendInput" || method == "CloseStdin" || method == "SendSignal" ||
      method == "Update") {
    auto pid = SelectedPid(req);
    if (!pid.ok()) co_return pid.error();
    auto term = ptys_.find(PtyKey(call.sb->rec.id, *pid));
    std::shared_ptr<PtySession> pty = term == ptys_.end() ? nullptr : term->second.lock();
    if (method == "SendInput") {
      auto input = PjMessage(req, "input");
      if (!input.ok()) co_return input.error();
      const bool to_pty = input->contains("pty") && !(*input)["pty"].is_null();
      auto data = PjBytes(*input, to_pty ? "pty" : "stdin");
      if (!data.ok()) co_return data.error();
      if (to_pty) {
        if (!pty)
          co_return MakeError(Code::kProcessNotFound,
                              "no terminal with pid " + std::to_string(*pid));
        if (auto st = co_await pty->Write(*data); !st.ok()) co_return st.error();
        co_return empty;
      }
      auto r = co_await WriteProcessStdin(call.sb, *pid, *data, false);
      if (!r.ok()) co_return co_await ExplainConflict(call.sb, *pid, r.error());
      co_return empty;
    }
    if (method == "CloseStdin") {
      auto r = co_await WriteProcessStdin(call.sb, *pid, std::string_view(), true);
      if (!r.ok()) co_return co_await ExplainConflict(call.sb, *pid, r.error());
      co_return empty;
    }
    if (method == "SendSignal") {
      static const std::vector<std::pair<const char*, int>> kSignals = {
          {"SIGNAL_UNSPECIFIED", 0}, {"SIGNAL_SIGTERM", SIGTERM}, {"SIGNAL_SIGKILL", SIGKILL}};
      auto sig = PjEnum(req, "signal", kSignals);
      if (!sig.ok()) co_return sig.error();
      if (*sig <= 0 || *sig > 64)
        co_return MakeError(Code::kInvalidRequest,
                            "'signal' must be SIGNAL_SIGTERM or SIGNAL_SIGKILL");
      auto r = co_await SignalProcess(call.sb, *pid, *sig);
      if (!r.ok()) co_return co_await ExplainConflict(call.sb, *pid, r.error());
      co_return empty;
    }
    // Update: a terminal's size.
    if (!req.contains("pty") || req["pty"].is_null()) co_return empty;
    if (!pty)
      co_return MakeError(Code::kProcessNotFound, "no terminal with pid " + std::to_string(*pid));
    auto p = PjMessage(req, "pty");
    if (!p.ok()) co_return p.error();
    auto size = PjMessage(*p, "size");
    if (!size.ok()) co_return size.error();
    auto cols = PjUint32(*size, "cols");
    auto rows = PjUint32(*size, "rows");
    if (!cols.ok()) co_return cols.error();
    if (!rows.ok()) co_return rows.error();
    if (*cols == 0 || *rows == 0 || *cols > 10000 || *rows > 10000)
      co_return MakeError(Code::kInvalidRequest, "terminal size must be 1-10000 columns and rows");
    if (auto st = co_await pty->Resize(static_cast<int>(*cols), static_cast<int>(*rows)); !st.ok())
      co_return st.error();
    co_return empty;
  }
  if (method == "StreamInput")
    co_return MakeError(
        Code::kNotSupported,
        "process.Process/StreamInput (a client stream) is not supported; use SendInput");
  co_return MakeError(Code::kNotSupported,
                      "process.Process/" + method + " is not implemented by hutch");
}

}  // namespace hutch::api::e2b
