// execd's sessions: one long-lived bash per session, so `cd` and `export`
// persist between runs. The bash is a core background process (its id is
// the session id; it survives a hutchd restart with the agent) reading
// commands on its stdin (session_protocol: what a run writes there and how
// its output ends). A run follows the output from the offset the process
// had reached when it started.
#include <signal.h>

#include "api/common/json_fields.h"
#include "api/opensandbox/command_stream.h"
#include "api/opensandbox/env_file.h"
#include "api/opensandbox/osb_api.h"
#include "api/opensandbox/session_protocol.h"
#include "core/process_ops.h"
#include "http/close_interrupts.h"

namespace hutch::api::opensandbox {

namespace {

// The `cmd` a session's bash is started with: what marks a process as one.
constexpr const char* kSessionMarker = "opensandbox-session";
constexpr std::chrono::seconds kPingInterval{3};

// The session's bash, checked to be one and alive.
asio::awaitable<Result<int>> SessionPid(std::shared_ptr<Sandbox> sb, const std::string& sid) {
  if (sid.empty() || sid.size() > 9 || sid.find_first_not_of("0123456789") != std::string::npos)
    co_return MakeError(Code::kProcessNotFound, "no session '" + sid + "'");
  const int pid = std::stoi(sid);
  auto info = co_await GetProcess(sb, pid);
  if (!info.ok() || info->cmd.value_or("") != kSessionMarker)
    co_return MakeError(Code::kProcessNotFound, "no session '" + sid + "'");
  if (!info->running) co_return MakeError(Code::kProcessNotFound, "session " + sid + " has ended");
  co_return pid;
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::CreateSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb) {
  // The body is optional ({cwd?}).
  auto text = co_await ctx.ReadBody(json_limit_);
  if (!text.ok()) co_return co_await SendError(ctx, text.error());
  Json j = text->empty() ? Json::object() : Json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    Error e = MakeError(Code::kInvalidRequest, "the body must be a JSON object {cwd?}");
    co_return co_await SendError(ctx, e);
  }
  auto cwd = OptString(j, "cwd");
  if (!cwd.ok()) co_return co_await SendError(ctx, cwd.error());
  ExecRequest r;
  r.argv = {"/bin/bash", "--noprofile", "--norc"};
  // The env file (commands.set_env) as it is when the session starts.
  auto file_env = co_await ExecdEnv(sb);
  if (!file_env.ok()) co_return co_await SendError(ctx, file_env.error());
  r.env = std::move(*file_env);
  r.cwd = cwd->value_or("");
  r.user = kDefaultUser;
  r.timeout_seconds = 0;  // lives until deleted (or the sandbox goes)
  const std::optional<std::string> marker = std::string(kSessionMarker);
  auto info = co_await StartProcess(sb, r, marker);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  const Json out = {{"session_id", std::to_string(info->pid)}};
  co_await ctx.SendJson(200, out);
}

asio::awaitable<void> OpenSandboxApi::RunInSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                                   const std::string& sid) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  auto command = OptString(*body, "command");
  auto cwd = OptString(*body, "cwd");
  auto timeout_ms = OptInt(*body, "timeout", 0, INT64_C(1) << 40);
  for (const Error* e :
       {command.ok() ? nullptr : &command.error(), cwd.ok() ? nullptr : &cwd.error(),
        timeout_ms.ok() ? nullptr : &timeout_ms.error()})
    if (e) co_return co_await SendError(ctx, *e);
  if (!*command || (*command)->empty()) {
    Error e = MakeError(Code::kInvalidRequest, "'command' is required");
    co_return co_await SendError(ctx, e);
  }
  auto pid = co_await SessionPid(sb, sid);
  if (!pid.ok()) co_return co_await SendError(ctx, pid.error());
  // One command at a time per bash: a second would interleave its output.
  const std::string key = sb->rec.id + "/" + sid;
  if (!busy_sessions_.insert(key).second) {
    Error e = MakeError(Code::kConflict, "session " + sid + " is running a command");
    co_return co_await SendError(ctx, e);
  }
  struct Release {
    std::set<std::string>& set;
    std::string key;
    ~Release() { set.erase(key); }
  } release{busy_sessions_, key};

  auto info = co_await GetProcess(sb, *pid);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  auto attached = co_await ProcessFollower::Attach(sb, *pid, info->output_bytes.value_or(0));
  if (!attached.ok()) co_return co_await SendError(ctx, attached.error());
  std::shared_ptr<ProcessFollower> f = std::move(*attached);

  const std::string sentinel = NewSentinel();
  const std::string script = SessionScript(**command, cwd->value_or(""), sentinel);
  auto wrote = co_await WriteProcessStdin(sb, *pid, script, false);
  if (!wrote.ok()) co_return co_await SendError(ctx, wrote.error());

  std::weak_ptr<ProcessFollower> weak = f;
  CloseInterrupts interrupt_on_close(ctx, weak);
  CommandStream out(ctx);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(timeout_ms->value_or(0));
  const bool has_deadline = timeout_ms->value_or(0) > 0;
  const Json init = InitEvent(sid);
  if (!(co_await out.Begin()).ok()) co_return;
  if (!(co_await out.Send(init)).ok()) co_return;
  SentinelLines lines[2] = {SentinelLines(sentinel), SentinelLines(sentinel)};  // stdout, stderr
  bool broken = false;
  std::optional<Json> end;
  while (!(lines[0].done() && lines[1].done())) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kPingInterval);
    if (has_deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ExitInfo timed_out;
        timed_out.signal = SIGKILL;
        timed_out.timed_out = true;
        end = ExitErrorEvent(timed_out);
        // The command cannot be stopped apart from its shell: the session
        // goes with it, as a timed-out command's process group does.
        (void)co_await SignalProcess(sb, *pid, SIGKILL);
        break;
      }
      wait = std::min(wait, left);
    }
    auto ev = co_await f->NextFor(wait);
    if (!ev) {
      const Json ping = PingEvent();
      if (!(co_await out.Send(ping)).ok()) {
        broken = true;
        break;
      }
      continue;
    }
    if (ev->kind == ProcessEvent::kStdout || ev->kind == ProcessEvent::kStderr) {
      const bool err = ev->kind == ProcessEvent::kStderr;
      for (auto& l : lines[err].Feed(ev->data)) {
        Json o = OutputEvent(err, std::move(l));
        if (!(co_await out.Send(o)).ok()) {
          broken = true;
          break;
        }
      }
      f->Consumed(ev->data.size());
      if (broken) break;
      continue;
    }
    if (ev->kind == ProcessEvent::kDropped) continue;
    if (ev->kind == ProcessEvent::kExit) {
      // The shell itself ended (`exit` in the command, or killed).
      // A non-zero status reads as the command's exit code.
      end = ExitCodeOf(ev->exit) != 0
                ? ExitErrorEvent(ev->exit)
                : FailureEvent("session " + sid + " ended (the command exited its shell)");
      break;
    }
    if (ev->error.message == "client went away") {
      broken = true;
      break;
    }
    ctx.NoteError(ev->error);
    end = FailureEvent(ev->error.message);
    break;
  }
  if (broken) {
    // Nobody waits for the command any more and it cannot be stopped apart
    // from its shell: the session ends (later runs say so).
    (void)co_await SignalProcess(sb, *pid, SIGKILL);
    ctx.CloseAfterResponse();
    co_return;
  }
  if (!end) {
    const int code = lines[0].status();
    ExitInfo exit;
    exit.exit_code = code;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    end = code == 0 ? CompleteEvent(ms) : ExitErrorEvent(exit);
  }
  if ((co_await out.Send(*end)).ok()) co_await out.End();
}

asio::awaitable<void> OpenSandboxApi::DeleteSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                                    const std::string& sid) {
  auto pid = co_await SessionPid(sb, sid);
  if (!pid.ok()) co_return co_await SendError(ctx, pid.error());
  // Follow the shell to its end, so that the session is gone for every
  // call after this answer.
  auto info = co_await GetProcess(sb, *pid);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  auto attached = co_await ProcessFollower::Attach(sb, *pid, info->output_bytes.value_or(0));
  auto r = co_await SignalProcess(sb, *pid, SIGKILL);
  if (!r.ok() && r.error().code != Code::kConflict) co_return co_await SendError(ctx, r.error());
  if (attached.ok()) {
    auto& f = **attached;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < give_up) {
      const std::chrono::milliseconds wait(500);
      auto ev = co_await f.NextFor(wait);
      if (!ev) continue;
      if (ev->kind == ProcessEvent::kExit || ev->kind == ProcessEvent::kError) break;
      if (ev->kind == ProcessEvent::kStdout || ev->kind == ProcessEvent::kStderr)
        f.Consumed(ev->data.size());
    }
  }
  co_await ctx.SendEmpty(200);
}

}  // namespace hutch::api::opensandbox
