#include "core/process_ops.h"

#include <nlohmann/json.hpp>

#include "core/process_exit_watch.h"

namespace hutch {

using nlohmann::json;

namespace {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

SysTime FromUnixMillis(int64_t ms) {
  return SysTime(std::chrono::duration_cast<SysTime::duration>(std::chrono::milliseconds(ms)));
}

// The agent of a running sandbox that knows the process frames.
Result<std::shared_ptr<AgentConnection>> ProcessAgent(const Sandbox& sb) {
  auto inst = sb.instance;
  if (!inst || !inst->agent() || !inst->agent()->alive())
    return MakeError(Code::kSandboxNotRunning, "sandbox " + sb.rec.id + " is not running");
  auto agent = inst->agent();
  if (!agent->has_feature("processes"))
    return MakeError(Code::kNotSupported,
                     "the agent of sandbox " + sb.rec.id + " predates background processes");
  return agent;
}

Result<ProcessInfo> InfoFromJson(const json& j, const Sandbox& sb) {
  try {
    ProcessInfo p;
    p.pid = j.at("pid").get<int>();
    p.argv = j.value("argv", std::vector<std::string>{});
    json meta = j.value("meta", json::object());
    if (meta.is_object() && meta.contains("cmd") && meta["cmd"].is_string())
      p.cmd = meta["cmd"].get<std::string>();
    p.user = j.value("user", "");
    p.cwd = j.value("cwd", "");
    p.background = j.value("background", false);
    p.pty = j.value("pty", false);
    p.running = j.value("running", false);
    p.stdin_open = j.value("stdin_open", false);
    p.started_at = FromUnixMillis(j.value("started_unix_ms", int64_t{0}));
    if (j.contains("ended_unix_ms")) p.ended_at = FromUnixMillis(j["ended_unix_ms"].get<int64_t>());
    if (j.contains("exit") && j["exit"].is_object()) {
      const json& x = j["exit"];
      ExitInfo e;
      e.exit_code = x.value("exit_code", -1);
      e.signal = x.value("signal", 0);
      e.timed_out = x.value("timed_out", false);
      e.duration_ms = x.value("duration_ms", int64_t{0});
      if (auto n = x.find("oom_kills"); n != x.end() && n->is_number_unsigned() && sb.instance)
        sb.instance->NoteAgentOomKills(n->get<uint64_t>());
      // Best effort, like exec's: the agent cannot see the memory cgroup,
      // so the sandbox's OOM count when it started rides along in meta.
      if (p.background && meta.is_object())
        e.oom_killed = LooksOomKilled(e, sb, meta.value("oom_kills_before", uint64_t{0}));
      p.exit = e;
    }
    if (j.contains("output_end")) p.output_bytes = j["output_end"].get<uint64_t>();
    if (j.contains("output_oldest")) p.output_oldest = j["output_oldest"].get<uint64_t>();
    return p;
  } catch (const json::exception& e) {
    return MakeError(Code::kInternal, std::string("malformed process from agent: ") + e.what());
  }
}

// One request to the agent, its kProcResult parsed as JSON.
asio::awaitable<Result<json>> CallAgent(std::shared_ptr<Sandbox> sb, wire::Type type,
                                        std::string payload) {
  auto agent = ProcessAgent(*sb);
  if (!agent.ok()) co_return agent.error();
  auto f = co_await (*agent)->Call(type, payload);
  // A request refused before sending (over the wire's limit) is the caller's error, not a lost
  // agent.
  if (!f.ok() && (f.error().code == Code::kAgentTimeout || f.error().code == Code::kInvalidRequest))
    co_return f.error();
  if (!f.ok()) co_return StreamEndedError(*sb, false);
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kProcResult)
    co_return MakeError(Code::kInternal, "agent answered with an unexpected frame");
  try {
    co_return json::parse(f->payload);
  } catch (const json::exception& e) {
    co_return MakeError(Code::kInternal, std::string("malformed agent answer: ") + e.what());
  }
}

asio::awaitable<Result<ProcessInfo>> CallForInfo(std::shared_ptr<Sandbox> sb, wire::Type type,
                                                 std::string payload) {
  auto j = co_await CallAgent(sb, type, std::move(payload));
  if (!j.ok()) co_return j.error();
  co_return InfoFromJson(*j, *sb);
}

}  // namespace

asio::awaitable<Result<ProcessInfo>> StartProcess(std::shared_ptr<Sandbox> sb,
                                                  const ExecRequest& req,
                                                  std::optional<std::string> cmd) {
  if (req.argv.empty() || req.argv[0].empty())
    co_return MakeError(Code::kInvalidRequest, "empty command");
  auto inst = sb->instance;
  // Sandbox-level env first, request env overrides it.
  std::map<std::string, std::string> env = sb->rec.env;
  for (const auto& [k, v] : req.env) env[k] = v;
  json meta = {{"cmd", cmd ? json(*cmd) : json(nullptr)},
               {"oom_kills_before", inst ? inst->OomKills() : 0}};
  json spec = {
      {"argv", req.argv},
      {"env", env},
      {"timeout_ms", req.timeout_ms.value_or(req.timeout_seconds * 1000)},
      {"stdin", true},
      {"meta", meta},
  };
  if (req.stdin_data) spec["stdin_data"] = *req.stdin_data;
  // The template's defaults stand in for what the request leaves out.
  const std::string& cwd = req.cwd.empty() ? sb->rec.workdir : req.cwd;
  const std::string& user = req.user.empty() ? sb->rec.user : req.user;
  if (!cwd.empty()) spec["cwd"] = cwd;
  if (!user.empty()) spec["user"] = user;
  auto info = co_await CallForInfo(sb, wire::Type::kProcStart, Dump(spec));
  if (info.ok()) NoteBackgroundStarted(*sb, *info);
  co_return info;
}

asio::awaitable<Result<std::vector<ProcessInfo>>> ListProcesses(std::shared_ptr<Sandbox> sb) {
  auto j = co_await CallAgent(sb, wire::Type::kProcList, std::string("{}"));
  if (!j.ok()) co_return j.error();
  std::vector<ProcessInfo> out;
  auto it = j->find("processes");
  if (it == j->end() || !it->is_array())
    co_return MakeError(Code::kInternal, "malformed process list from agent");
  for (const auto& p : *it) {
    auto info = InfoFromJson(p, *sb);
    if (!info.ok()) co_return info.error();
    out.push_back(std::move(*info));
  }
  co_return out;
}

asio::awaitable<Result<ProcessInfo>> GetProcess(std::shared_ptr<Sandbox> sb, int pid) {
  // (A braced json argument inside co_await trips GCC 12: build it first.)
  const json req = {{"pid", pid}};
  co_return co_await CallForInfo(sb, wire::Type::kProcStatus, Dump(req));
}

asio::awaitable<Result<ProcessInfo>> WriteProcessStdin(std::shared_ptr<Sandbox> sb, int pid,
                                                       std::string_view data, bool close) {
  if (data.size() + wire::kProcStdinHeader > wire::kMaxPayload)
    co_return MakeError(Code::kPayloadTooLarge,
                        "stdin chunk larger than " +
                            std::to_string(wire::kMaxPayload - wire::kProcStdinHeader) + " bytes");
  co_return co_await CallForInfo(sb, wire::Type::kProcStdin,
                                 wire::EncodeProcStdin(static_cast<uint32_t>(pid), close, data));
}

asio::awaitable<Result<ProcessInfo>> SignalProcess(std::shared_ptr<Sandbox> sb, int pid,
                                                   int signal) {
  const json req = {{"pid", pid}, {"signal", signal}};
  co_return co_await CallForInfo(sb, wire::Type::kProcSignal, Dump(req));
}

asio::awaitable<Result<std::unique_ptr<ProcessFollower>>> ProcessFollower::Attach(
    std::shared_ptr<Sandbox> sb, int pid, uint64_t from) {
  auto agent = ProcessAgent(*sb);
  if (!agent.ok()) co_return agent.error();
  auto stream = (*agent)->OpenStream();
  std::unique_ptr<ProcessFollower> f(new ProcessFollower(sb, stream, from));
  const json req = {{"pid", pid}, {"from", from}};
  if (auto st = co_await stream->Send(wire::Type::kProcAttach, Dump(req)); !st.ok())
    co_return st.error();
  auto answer = co_await stream->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& first = *answer;
  if (!first) co_return StreamEndedError(*sb, false);
  if (first->type == wire::Type::kError) co_return AgentErrorFromPayload(first->payload);
  if (first->type != wire::Type::kStarted)
    co_return MakeError(Code::kInternal, "agent answered attach with an unexpected frame");
  json j;
  try {
    j = json::parse(first->payload);
  } catch (const json::exception& e) {
    co_return MakeError(Code::kInternal, std::string("malformed agent attach answer: ") + e.what());
  }
  auto info = InfoFromJson(j, *sb);
  if (!info.ok()) co_return info.error();
  f->info_ = std::move(*info);
  if (j.contains("meta") && j["meta"].is_object())
    f->oom_before_ = j["meta"].value("oom_kills_before", uint64_t{0});
  co_return std::move(f);
}

asio::awaitable<std::optional<ProcessEvent>> ProcessFollower::NextFor(
    std::chrono::milliseconds timeout) {
  ProcessEvent ev;
  if (done_) {
    ev.error = MakeError(Code::kInternal, "process stream already ended");
    co_return ev;
  }
  bool timed_out = false;
  auto f = co_await stream_->NextFor(timeout, &timed_out);
  if (timed_out) co_return std::nullopt;
  if (!f) {
    done_ = true;
    ev.error = StreamEndedError(*sb_, stream_->interrupted());
    co_return ev;
  }
  switch (f->type) {
    case wire::Type::kStdout:
    case wire::Type::kStderr:
      ev.kind = f->type == wire::Type::kStdout ? ProcessEvent::kStdout : ProcessEvent::kStderr;
      ev.offset = pos_;
      pos_ += f->payload.size();
      ev.data = std::move(f->payload);
      break;
    case wire::Type::kProcDropped:
      try {
        auto j = json::parse(f->payload);
        ev.dropped_from = j.at("from").get<uint64_t>();
        ev.offset = j.at("oldest").get<uint64_t>();
        ev.dropped_bytes = j.at("dropped_bytes").get<uint64_t>();
        ev.kind = ProcessEvent::kDropped;
        pos_ = ev.offset;
      } catch (const json::exception&) {
        done_ = true;
        ev.error = MakeError(Code::kInternal, "malformed agent dropped frame");
      }
      break;
    case wire::Type::kExit: {
      done_ = true;
      auto exit = ParseExitFrame(f->payload, *sb_, oom_before_);
      if (!exit.ok()) {
        ev.error = exit.error();
        break;
      }
      ev.exit = *exit;
      ev.kind = ProcessEvent::kExit;
      NoteBackgroundExited(*sb_, info_.pid, ev.exit);
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

}  // namespace hutch
