// /v1/sandboxes/{id}/exec and /exec/stream.
//
// Both watch the client's socket while the command runs: if the client goes
// away the command is killed inside the sandbox (unless "detach":true), so
// cancellation reaches the guest and not only the socket.
#include "api/common/exec_answer.h"
#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/common/kept_output.h"
#include "api/common/utf8.h"
#include "api/v1/v1_api.h"
#include "core/exec_session.h"

namespace hutch::api {

Result<std::shared_ptr<Sandbox>> V1Api::RunningOrResumed(const std::string& id, bool auto_resume) {
  if (auto_resume) {
    auto rec = mgr_->Get(id);
    if (rec.ok() && rec->status == SandboxStatus::kPaused) {
      if (auto r = mgr_->Resume(id); !r.ok()) return r.error();
    }
  }
  return mgr_->GetRunning(id);
}

asio::awaitable<void> V1Api::Exec(HttpContext& ctx, const std::string& id, bool stream) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto parsed = ParseExecBody(*body, 60);
  if (!parsed.ok()) co_return co_await ctx.SendError(parsed.error());
  ExecRequest* req = &parsed->req;
  auto sb = RunningOrResumed(id, parsed->auto_resume);
  if (!sb.ok()) co_return co_await ctx.SendError(sb.error());
  const bool detach = req->detach;
  auto started = co_await ExecSession::Start(*sb, std::move(*req));
  if (!started.ok()) co_return co_await ctx.SendError(started.error());
  ++metrics_.execs;
  std::shared_ptr<ExecSession> session = std::move(started).value();
  std::weak_ptr<ExecSession> weak = session;
  ctx.WatchClose([weak] {
    if (auto s = weak.lock()) s->Interrupt();
  });

  if (!stream) {
    // What is kept is capped after encoding, per stream and server-wide
    // (issue 32 #3: 32 MiB of \x01 used to become a 200 MB answer).
    OutputBudget::Lease lease(&exec_budget_);
    KeptOutput out(cfg_.exec_output_cap, &lease), err(cfg_.exec_output_cap, &lease);
    while (true) {
      ExecEvent ev = co_await session->Next();
      if (ev.kind == ExecEvent::kExit) {
        ctx.StopWatchingClose();
        co_return co_await SendExecAnswer(ctx, exec_encoder_, ev.exit, out, err, lease);
      }
      if (ev.kind == ExecEvent::kError) {
        ctx.StopWatchingClose();
        if (detach) session->Detach();
        if (!ctx.keep_alive() && ev.error.code == Code::kUnavailable &&
            ev.error.message == "client went away")
          co_return;  // nobody to answer; dropping the session kills the process
        co_return co_await ctx.SendError(ev.error);
      }
      const size_t n = ev.data.size();
      (ev.kind == ExecEvent::kStdout ? out : err).Add(std::move(ev.data));
      session->Consumed(n);
    }
  }

  GaugeHold open_stream{metrics_.open_streams};
  if (auto st = co_await ctx.BeginSse(); !st.ok()) {
    ctx.StopWatchingClose();
    if (detach) session->Detach();
    co_return;
  }
  Utf8Splitter split_out, split_err;
  auto send_pieces = [&](const char* name,
                         std::vector<Utf8Splitter::Piece> pieces) -> asio::awaitable<Status> {
    for (auto& p : pieces) {
      std::string ev = OutputEvent(name, p.text, p.bytes);
      if (auto st = co_await ctx.WriteChunk(ev); !st.ok()) co_return st;
    }
    co_return Status{};
  };
  nlohmann::json start = {{"pid", session->pid()}};
  std::string start_event = SseJsonEvent("start", start);
  Status st = co_await ctx.WriteChunk(start_event);
  while (st.ok()) {
    auto ev = co_await session->NextFor(
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.sse_ping_interval));
    if (!ev) {
      // Keeps idle proxies from cutting a quiet command's stream.
      st = co_await ctx.WriteChunk(": ping\n\n");
      continue;
    }
    if (ev->kind == ExecEvent::kStdout || ev->kind == ExecEvent::kStderr) {
      bool is_out = ev->kind == ExecEvent::kStdout;
      auto pieces = (is_out ? split_out : split_err).Feed(ev->data);
      st = co_await send_pieces(is_out ? "stdout" : "stderr", std::move(pieces));
      session->Consumed(ev->data.size());
      continue;
    }
    if (ev->kind == ExecEvent::kExit) {
      st = co_await send_pieces("stdout", split_out.Flush());
      if (st.ok()) st = co_await send_pieces("stderr", split_err.Flush());
      if (st.ok()) st = co_await ctx.WriteChunk(SseJsonEvent("exit", ExitJson(ev->exit)));
      if (st.ok()) st = co_await ctx.EndStream();
      ctx.StopWatchingClose();
      co_return;
    }
    // kError: the client left (interrupt) or the sandbox went away.
    if (session->pid() && ev->error.message != "client went away") {
      nlohmann::json err = {{"code", CodeName(ev->error.code)},
                            {"message", ev->error.message},
                            {"request_id", ctx.request_id()}};
      std::string err_event = SseJsonEvent("error", err);
      ctx.NoteError(ev->error);
      st = co_await ctx.WriteChunk(err_event);
      if (st.ok()) st = co_await ctx.EndStream();
      ctx.StopWatchingClose();
      co_return;
    }
    break;
  }
  // The client is gone. Dropping the session cancels the command in the
  // sandbox; a detached one keeps running.
  ctx.StopWatchingClose();
  if (detach) session->Detach();
}

}  // namespace hutch::api
