// execd's commands over hutch's background processes (core/process_ops:
// held by the agent, output kept in a ring with byte offsets): a command
// is a process whose id is its pid, so status, logs and interrupt need no
// state here. A foreground command streams its output line by line and
// ends with execution_complete (exit 0) or an error event carrying the
// exit code; a background one answers init + execution_complete at once.
#include <signal.h>

#include "api/common/json_fields.h"
#include "api/opensandbox/command_stream.h"
#include "api/opensandbox/env_file.h"
#include "api/opensandbox/osb_api.h"
#include "core/process_ops.h"
#include "http/close_interrupts.h"

namespace hutch::api::opensandbox {

namespace {

// execd's keep-alive interval on a command stream.
constexpr std::chrono::seconds kPingInterval{3};

Result<int> CommandPid(const std::string& id) {
  if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos)
    return MakeError(Code::kProcessNotFound, "no command '" + id + "'");
  return std::stoi(id);
}

Json StatusJson(const ProcessInfo& p) {
  Json j = {{"id", std::to_string(p.pid)},
            {"content", p.cmd.value_or(p.argv.empty() ? "" : p.argv.back())},
            {"running", p.running},
            {"started_at", FormatRfc3339(p.started_at)}};
  j["exit_code"] = p.exit ? Json(ExitCodeOf(*p.exit)) : Json(nullptr);
  j["finished_at"] = p.ended_at ? Json(FormatRfc3339(*p.ended_at)) : Json(nullptr);
  if (p.exit && p.exit->signal) j["error"] = std::string("signal: ") + strsignal(p.exit->signal);
  return j;
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::RunCommand(HttpContext& ctx, std::shared_ptr<Sandbox> sb) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  const Json& j = *body;
  auto command = OptString(j, "command");
  auto argv = OptStringArray(j, "argv");
  auto cwd = OptString(j, "cwd");
  auto background = OptBool(j, "background");
  auto timeout_ms = OptInt(j, "timeout", 0, INT64_C(1) << 40);
  auto uid = OptInt(j, "uid", 0, UINT32_MAX - 1);
  auto envs = OptStringMap(j, "envs");
  for (const Error* e :
       {command.ok() ? nullptr : &command.error(), argv.ok() ? nullptr : &argv.error(),
        cwd.ok() ? nullptr : &cwd.error(), background.ok() ? nullptr : &background.error(),
        timeout_ms.ok() ? nullptr : &timeout_ms.error(), uid.ok() ? nullptr : &uid.error(),
        envs.ok() ? nullptr : &envs.error()})
    if (e) co_return co_await SendError(ctx, *e);
  // Shell text (`command`, run by bash) or a native argv list (`argv`,
  // executed as it is): exactly one of them.
  const bool has_command = *command && !(*command)->empty();
  const bool has_argv = *argv && !(*argv)->empty();
  if (has_command == has_argv) {
    Error e =
        MakeError(Code::kInvalidRequest,
                  has_command ? "give 'command' or 'argv', not both"
                              : "'command' (shell text) or 'argv' (a non-empty list) is required");
    co_return co_await SendError(ctx, e);
  }
  if (has_argv && (**argv)[0].empty()) {
    Error e = MakeError(Code::kInvalidRequest, "'argv[0]' (the program) must not be empty");
    co_return co_await SendError(ctx, e);
  }
  ExecRequest r;
  r.argv = has_command ? std::vector<std::string>{"/bin/bash", "-c", **command} : **argv;
  r.cwd = cwd->value_or("");
  r.user = *uid ? std::to_string(**uid) : kDefaultUser;
  // Over the sandbox's env: the env file (commands.set_env), then `envs`.
  auto file_env = co_await ExecdEnv(sb);
  if (!file_env.ok()) co_return co_await SendError(ctx, file_env.error());
  r.env = std::move(*file_env);
  if (*envs)
    for (const auto& [k, v] : **envs) r.env[k] = v;
  r.timeout_seconds = 0;
  if (*timeout_ms && **timeout_ms > 0) r.timeout_ms = **timeout_ms;
  r.stdin_data = std::string();  // execd commands have no stdin
  // What status reports as `content`: the shell text, or the argv joined.
  std::string joined;
  if (has_argv)
    for (const auto& a : **argv) joined += (joined.empty() ? "" : " ") + a;
  std::optional<std::string> content = has_command ? **command : joined;
  auto info = co_await StartProcess(sb, r, content);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  const int pid = info->pid;
  const std::string id = std::to_string(pid);
  CommandStream out(ctx);

  if (background->value_or(false)) {
    const Json init = InitEvent(id), done = CompleteEvent(0);
    if (!(co_await out.Begin()).ok()) co_return;
    if (!(co_await out.Send(init)).ok()) co_return;
    if (!(co_await out.Send(done)).ok()) co_return;
    co_return co_await out.End();
  }

  auto attached = co_await ProcessFollower::Attach(sb, pid, 0);
  if (!attached.ok()) co_return co_await SendError(ctx, attached.error());
  std::shared_ptr<ProcessFollower> f = std::move(*attached);
  std::weak_ptr<ProcessFollower> weak = f;
  CloseInterrupts interrupt_on_close(ctx, weak);
  const auto t0 = std::chrono::steady_clock::now();
  const Json init = InitEvent(id);
  if (!(co_await out.Begin()).ok()) co_return;
  if (!(co_await out.Send(init)).ok()) co_return;
  LineSplitter lines[2];  // stdout, stderr
  auto send_lines = [&](bool err, std::vector<std::string> ls) -> asio::awaitable<bool> {
    for (auto& l : ls) {
      Json ev = OutputEvent(err, std::move(l));
      if (!(co_await out.Send(ev)).ok()) co_return false;
    }
    co_return true;
  };
  while (true) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kPingInterval);
    auto ev = co_await f->NextFor(wait);
    if (!ev) {
      const Json ping = PingEvent();
      if (!(co_await out.Send(ping)).ok()) break;
      continue;
    }
    if (ev->kind == ProcessEvent::kStdout || ev->kind == ProcessEvent::kStderr) {
      const bool err = ev->kind == ProcessEvent::kStderr;
      if (!co_await send_lines(err, lines[err].Feed(ev->data))) break;
      f->Consumed(ev->data.size());
      continue;
    }
    if (ev->kind == ProcessEvent::kDropped) continue;
    if (ev->kind == ProcessEvent::kExit) {
      if (!co_await send_lines(false, lines[0].Flush())) co_return;
      if (!co_await send_lines(true, lines[1].Flush())) co_return;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      Json end = ExitCodeOf(ev->exit) == 0 ? CompleteEvent(ms) : ExitErrorEvent(ev->exit);
      if ((co_await out.Send(end)).ok()) co_await out.End();
      co_return;
    }
    // kError: the client left (a foreground command goes with its caller,
    // as in execd) or the sandbox went away.
    if (ev->error.message != "client went away") {
      ctx.NoteError(ev->error);
      const Json fail = FailureEvent(ev->error.message);
      if ((co_await out.Send(fail)).ok()) co_await out.End();
      co_return;
    }
    break;
  }
  // The stream broke: a foreground command does not outlive its caller.
  (void)co_await SignalProcess(sb, pid, SIGKILL);
  ctx.CloseAfterResponse();
}

asio::awaitable<void> OpenSandboxApi::InterruptCommand(HttpContext& ctx,
                                                       std::shared_ptr<Sandbox> sb) {
  auto pid = CommandPid(ctx.Query("id").value_or(""));
  if (!pid.ok()) co_return co_await SendError(ctx, pid.error());
  auto info = co_await GetProcess(sb, *pid);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  // SIGKILL to the command's process group: an interrupt that cannot be
  // trapped, so the command is over when the status says so.
  if (info->running) {
    auto r = co_await SignalProcess(sb, *pid, SIGKILL);
    if (!r.ok() && r.error().code != Code::kConflict) co_return co_await SendError(ctx, r.error());
  }
  co_await ctx.SendEmpty(200);
}

asio::awaitable<void> OpenSandboxApi::CommandStatus(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                                    const std::string& cid) {
  auto pid = CommandPid(cid);
  if (!pid.ok()) co_return co_await SendError(ctx, pid.error());
  auto info = co_await GetProcess(sb, *pid);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  co_await ctx.SendJson(200, StatusJson(*info));
}

asio::awaitable<void> OpenSandboxApi::CommandLogs(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                                  const std::string& cid) {
  auto pid = CommandPid(cid);
  if (!pid.ok()) co_return co_await SendError(ctx, pid.error());
  auto cursor = QueryInt(ctx.Query("cursor"), "cursor", 0, INT64_MAX);
  if (!cursor.ok()) co_return co_await SendError(ctx, cursor.error());
  auto info = co_await GetProcess(sb, *pid);
  if (!info.ok()) co_return co_await SendError(ctx, info.error());
  if (!info->output_bytes) {
    Error e = MakeError(Code::kProcessNotFound, "command " + cid + " keeps no logs");
    co_return co_await SendError(ctx, e);
  }
  // The cursor is a byte offset into the command's output (stdout and
  // stderr interleaved as they came): what is there now, from the cursor.
  const uint64_t end = *info->output_bytes;
  uint64_t pos = static_cast<uint64_t>(cursor->value_or(0));
  std::string content;
  if (pos < end) {
    auto attached = co_await ProcessFollower::Attach(sb, *pid, pos);
    if (!attached.ok()) co_return co_await SendError(ctx, attached.error());
    auto& f = **attached;
    while (pos < end) {
      const std::chrono::milliseconds wait(2000);
      auto ev = co_await f.NextFor(wait);
      if (!ev) break;
      if (ev->kind == ProcessEvent::kStdout || ev->kind == ProcessEvent::kStderr) {
        content += ev->data;
        pos = ev->offset + ev->data.size();
        f.Consumed(ev->data.size());
      } else if (ev->kind == ProcessEvent::kDropped) {
        pos = ev->offset;  // older output is gone from the ring
      } else {
        break;
      }
    }
  } else {
    pos = std::max(pos, end);
  }
  ctx.AddHeader("EXECD-COMMANDS-TAIL-CURSOR", std::to_string(pos));
  co_await ctx.SendText(200, "text/plain; charset=utf-8", std::move(content));
}

}  // namespace hutch::api::opensandbox
