// exec, and run's command form: one command to its end through
// ExecSession, its output sent as progress while it runs and kept (up to
// kKeep per stream) for the result. A cancelled request, a closed stream
// or an ended session interrupts the session, which kills the command in
// the sandbox: cancellation reaches the guest, not only the socket.
#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/common/utf8.h"
#include "api/mcp/mcp_tools.h"
#include "core/exec_session.h"

namespace hutch::api::mcp {

namespace {

// What a result keeps of each stream: tool results go into a model's
// context, where megabytes of log help nobody; the tail is cut, and said.
constexpr size_t kKeep = 1 << 20;

}  // namespace

asio::awaitable<Result<ToolOutput>> Tools::ExecIn(std::shared_ptr<Sandbox> sb, const json& a,
                                                  ToolCall& call) {
  // The /v1 exec body, so the checks and defaults are /v1's.
  json body = json::object();
  for (const char* k : {"cmd", "cwd", "env", "user", "timeout_seconds"})
    if (a.contains(k)) body[k] = a[k];
  auto parsed = ParseExecBody(body, 60);
  if (!parsed.ok()) co_return parsed.error();
  if (call.cancel->fired()) co_return MakeError(Code::kUnavailable, "the request was cancelled");
  auto started = co_await ExecSession::Start(std::move(sb), std::move(parsed->req));
  if (!started.ok()) co_return started.error();
  std::shared_ptr<ExecSession> session = std::move(started).value();
  std::weak_ptr<ExecSession> weak = session;
  CancelHook hook(*call.cancel, [weak] {
    if (auto s = weak.lock()) s->Interrupt();
  });
  std::string out, err;
  size_t dropped = 0;
  double sent = 0;
  Utf8Splitter split_out, split_err;
  while (true) {
    auto ev = co_await session->NextFor(std::chrono::seconds(15));
    if (!ev) {
      if (call.keepalive) co_await call.keepalive();
      continue;
    }
    if (ev->kind == ExecEvent::kError) {
      if (call.cancel->fired())
        co_return MakeError(Code::kUnavailable,
                            "the request was cancelled; the command was killed");
      co_return ev->error;
    }
    if (ev->kind == ExecEvent::kExit) {
      const ExitInfo& x = ev->exit;
      ToolOutput o;
      o.structured = {{"stdout", LossyUtf8(out)},   {"stderr", LossyUtf8(err)},
                      {"exit_code", x.exit_code},   {"timed_out", x.timed_out},
                      {"oom_killed", x.oom_killed}, {"duration_ms", x.duration_ms},
                      {"truncated_bytes", dropped}};
      if (x.signal) o.structured["signal"] = x.signal;
      o.text = o.structured["stdout"].get<std::string>();
      if (!err.empty()) o.text += "\n[stderr]\n" + o.structured["stderr"].get<std::string>();
      o.text += "\n[exit code " + std::to_string(x.exit_code) + "]";
      if (x.timed_out) o.text += " [timed out: killed]";
      if (x.oom_killed) o.text += " [killed: out of memory]";
      if (dropped) o.text += " [" + std::to_string(dropped) + " bytes of output not kept]";
      co_return o;
    }
    const bool is_out = ev->kind == ExecEvent::kStdout;
    std::string& keep = is_out ? out : err;
    const size_t n = ev->data.size();
    const size_t room = keep.size() < kKeep ? kKeep - keep.size() : 0;
    keep.append(ev->data, 0, std::min(room, n));
    dropped += n > room ? n - room : 0;
    if (call.progress) {
      std::string text;
      for (auto& p : (is_out ? split_out : split_err).Feed(ev->data))
        text += p.text ? p.bytes : LossyUtf8(p.bytes);
      sent += static_cast<double>(n);
      if (!text.empty()) co_await call.progress(sent, std::move(text));
    }
    session->Consumed(n);
  }
}

asio::awaitable<Result<ToolOutput>> Tools::Exec(const json& a, ToolCall& call) {
  MCP_FIELD(sb, RunningSandbox(a, call));
  co_return co_await ExecIn(*sb, a, call);
}

asio::awaitable<Result<ToolOutput>> Tools::Run(const json& a, ToolCall& call) {
  const bool has_code = a.contains("code"), has_cmd = a.contains("cmd");
  if (has_code == has_cmd)
    co_return MakeError(Code::kInvalidRequest, "give 'code' (with 'language') or 'cmd', not both");
  if (!has_code && a.contains("language"))
    co_return MakeError(Code::kInvalidRequest, "'language' goes with 'code', not 'cmd'");
  MCP_FIELD(tpl, OptString(a, "template"));
  MCP_FIELD(timeout, OptInt(a, "timeout_seconds", 1, 3600));
  CreateOptions o;
  o.template_name = tpl->value_or(has_code ? "code-interpreter" : "base");
  // Removed below; the ttl is for a hutchd that dies before it can.
  o.ttl_seconds = timeout->value_or(60) + 300;
  o.owner_key = call.who.owner;
  o.scope = call.who.Scope();
  o.metadata["hutch.mcp"] = "run";
  auto rec = co_await mgr_->Create(std::move(o));
  if (!rec.ok()) co_return rec.error();
  const std::string id = rec->id;
  Result<ToolOutput> out = MakeError(Code::kInternal, "unreachable");
  if (has_code) {
    json c = {{"code", a["code"]}};
    for (const char* k : {"language", "env", "timeout_seconds"})
      if (a.contains(k)) c[k] = a[k];
    out = co_await CodeIn(id, c, call);
  } else {
    auto sb = mgr_->GetRunning(id);
    if (sb.ok()) out = co_await ExecIn(*sb, a, call);
    else out = sb.error();
  }
  (void)co_await mgr_->Delete(id);
  if (out.ok()) out->structured["sandbox_id"] = id;
  co_return out;
}

}  // namespace hutch::api::mcp
