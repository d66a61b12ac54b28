#include "core/pty_session.h"

#include <nlohmann/json.hpp>

namespace hutch {

using nlohmann::json;

asio::awaitable<Result<std::unique_ptr<PtySession>>> PtySession::Start(std::shared_ptr<Sandbox> sb,
                                                                       PtyRequest req) {
  auto inst = sb->instance;
  if (!inst || !inst->agent() || !inst->agent()->alive())
    co_return MakeError(Code::kSandboxNotRunning, "sandbox " + sb->rec.id + " is not running");
  auto agent = inst->agent();
  if (!agent->has_feature("pty"))
    co_return MakeError(Code::kNotSupported,
                        "the agent of sandbox " + sb->rec.id + " predates terminals");
  auto stream = agent->OpenStream();
  std::unique_ptr<PtySession> s(new PtySession(sb, stream));
  s->oom_before_ = inst->OomKills();
  // Sandbox-level env first, request env overrides it.
  std::map<std::string, std::string> env = sb->rec.env;
  for (const auto& [k, v] : req.env) env[k] = v;
  json spec = {{"env", env}, {"cols", req.cols}, {"rows", req.rows}};
  if (!req.argv.empty()) spec["argv"] = req.argv;
  // The template's defaults stand in for what the request leaves out.
  const std::string& cwd = req.cwd.empty() ? sb->rec.workdir : req.cwd;
  const std::string& user = req.user.empty() ? sb->rec.user : req.user;
  if (!cwd.empty()) spec["cwd"] = cwd;
  if (!user.empty()) spec["user"] = user;
  if (auto st = co_await stream->Send(wire::Type::kPtyStart,
                                      spec.dump(-1, ' ', false, json::error_handler_t::replace));
      !st.ok())
    co_return st.error();
  auto answer = co_await stream->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& f = *answer;
  if (!f) co_return StreamEndedError(*sb, false);
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kStarted)
    co_return MakeError(Code::kInternal, "agent answered pty with an unexpected frame");
  try {
    s->pid_ = json::parse(f->payload).value("pid", 0);
  } catch (const json::exception&) {
    co_return MakeError(Code::kInternal, "malformed agent start frame");
  }
  co_return std::move(s);
}

asio::awaitable<PtyEvent> PtySession::Next() {
  PtyEvent ev;
  if (done_) {
    ev.error = MakeError(Code::kInternal, "terminal stream already ended");
    co_return ev;
  }
  auto f = co_await stream_->Next();
  if (!f) {
    done_ = true;
    ev.error = StreamEndedError(*sb_, stream_->interrupted());
    co_return ev;
  }
  switch (f->type) {
    case wire::Type::kStdout:
    case wire::Type::kStderr:
      ev.kind = PtyEvent::kOutput;
      ev.data = std::move(f->payload);
      break;
    case wire::Type::kExit: {
      done_ = true;
      auto exit = ParseExitFrame(f->payload, *sb_, oom_before_);
      if (!exit.ok()) {
        ev.error = exit.error();
        break;
      }
      ev.exit = *exit;
      ev.kind = PtyEvent::kExit;
      break;
    }
    case wire::Type::kError:
      done_ = true;
      ev.error = AgentErrorFromPayload(f->payload);
      break;
    default:
      done_ = true;
      ev.error = MakeError(Code::kInternal, "unexpected frame from agent");
  }
  co_return ev;
}

asio::awaitable<Status> PtySession::Write(std::string_view bytes) {
  // Chunked so no frame exceeds the protocol's payload limit.
  for (size_t off = 0; off < bytes.size(); off += wire::kChunk)
    if (auto st = co_await stream_->Send(wire::Type::kStdin, bytes.substr(off, wire::kChunk));
        !st.ok())
      co_return st;
  co_return Status{};
}

asio::awaitable<Status> PtySession::Resize(int cols, int rows) {
  const json j = {{"cols", cols}, {"rows", rows}};
  co_return co_await stream_->Send(wire::Type::kPtyResize, j.dump());
}

}  // namespace hutch
