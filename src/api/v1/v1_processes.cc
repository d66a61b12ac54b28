// /v1/sandboxes/{id}/processes: background processes that outlive the
// request (and the connection, and hutchd itself) that started them, with
// their output retained for reattaching (docs/api.md "Processes").
#include <signal.h>

#include <cctype>

#include "api/common/exec_body.h"
#include "api/common/json_fields.h"
#include "api/common/utf8.h"
#include "api/v1/v1_api.h"
#include "core/process_ops.h"

namespace hutch::api {

namespace {

using nlohmann::json;

json ProcessJson(const ProcessInfo& p) {
  json j = {{"pid", p.pid},
            {"cmd", p.cmd ? json(*p.cmd) : json(nullptr)},
            {"argv", p.argv},
            {"cwd", p.cwd},
            {"user", p.user},
            {"background", p.background},
            {"pty", p.pty},
            {"running", p.running},
            {"status", p.running ? "running" : "exited"},
            {"exit_code", nullptr},
            {"signal", nullptr},
            {"timed_out", false},
            {"oom_killed", false},
            {"started_at", FormatRfc3339(p.started_at)},
            {"ended_at", nullptr},
            {"duration_ms", nullptr},
            {"stdin_open", p.stdin_open},
            {"output_bytes", p.output_bytes ? json(*p.output_bytes) : json(nullptr)},
            {"output_oldest", p.output_oldest ? json(*p.output_oldest) : json(nullptr)}};
  if (p.exit) {
    j["exit_code"] = p.exit->exit_code;
    if (p.exit->signal) j["signal"] = p.exit->signal;
    j["timed_out"] = p.exit->timed_out;
    j["oom_killed"] = p.exit->oom_killed;
    j["duration_ms"] = p.exit->duration_ms;
  }
  if (p.ended_at) j["ended_at"] = FormatRfc3339(*p.ended_at);
  return j;
}

// A pid path segment: a positive decimal integer.
Result<int> ParsePid(const std::string& s) {
  if (s.empty() || s.size() > 9)
    return MakeError(Code::kInvalidRequest, "pid '" + s + "' is not a process id");
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return MakeError(Code::kInvalidRequest, "pid '" + s + "' is not a process id");
    v = v * 10 + (c - '0');
  }
  if (v <= 0) return MakeError(Code::kInvalidRequest, "pid '" + s + "' is not a process id");
  return v;
}

// A byte offset (query `from` or the Last-Event-ID header).
Result<uint64_t> ParseOffset(const std::string& s, const char* what) {
  if (s.empty() || s.size() > 19)
    return MakeError(Code::kInvalidRequest,
                     std::string(what) + " must be a byte offset (a non-negative integer)");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return MakeError(Code::kInvalidRequest,
                       std::string(what) + " must be a byte offset (a non-negative integer)");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// "SIGTERM", "TERM", "sigterm", "15" or 15.
Result<int> ParseSignal(const json& v) {
  static const std::pair<const char*, int> kNames[] = {
      {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},
      {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},
      {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
      {"USR2", SIGUSR2},     {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM},
      {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},     {"STOP", SIGSTOP},
      {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
      {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
      {"WINCH", SIGWINCH},   {"IO", SIGIO},     {"POLL", SIGPOLL},     {"PWR", SIGPWR},
      {"SYS", SIGSYS},
  };
  constexpr int kMaxSignal = 64;  // SIGRTMAX on Linux
  const Error bad =
      MakeError(Code::kInvalidRequest,
                "'signal' must be a signal name (\"SIGTERM\", \"TERM\") or number (1-64)");
  if (v.is_number_integer()) {
    const int64_t n = v.get<int64_t>();
    if (n < 1 || n > kMaxSignal) return bad;
    return static_cast<int>(n);
  }
  if (!v.is_string()) return bad;
  std::string s = v.get<std::string>();
  if (!s.empty() && s.size() <= 2 && std::isdigit(static_cast<unsigned char>(s[0]))) {
    auto n = ParseOffset(s, "signal");
    if (!n.ok() || *n < 1 || *n > kMaxSignal) return bad;
    return static_cast<int>(*n);
  }
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s.rfind("SIG", 0) == 0) s = s.substr(3);
  for (const auto& [name, num] : kNames)
    if (s == name) return num;
  return bad;
}

}  // namespace

asio::awaitable<void> V1Api::Processes(HttpContext& ctx, const std::string& id,
                                       const std::vector<std::string>& seg) {
  using V = http::verb;
  const V m = ctx.method();
  const size_t n = seg.size();  // v1 sandboxes {id} processes [pid [op]]
  if (n == 4) {
    if (m == V::post) {
      HUTCH_FIELD(body, co_await ctx.ReadJson(cfg_.json_body_limit));
      // Background processes have no timeout unless they ask for one.
      HUTCH_FIELD(parsed, ParseExecBody(*body, 0));
      HUTCH_FIELD(sb, RunningOrResumed(id, parsed->auto_resume));
      HUTCH_FIELD(info, co_await StartProcess(*sb, parsed->req, parsed->cmd));
      ++metrics_.execs;
      co_return co_await ctx.SendJson(201, ProcessJson(*info));
    }
    if (m == V::get) {
      HUTCH_FIELD(sb, mgr_->GetRunning(id));
      HUTCH_FIELD(list, co_await ListProcesses(*sb));
      json out = {{"items", json::array()}};
      for (const auto& p : *list) out["items"].push_back(ProcessJson(p));
      co_return co_await ctx.SendJson(200, out);
    }
    co_return co_await ctx.SendError(MethodNotAllowed(m));
  }
  const std::string op = n == 6 ? seg[5] : "";
  if (n > 6 || (n == 6 && op != "stream" && op != "stdin" && op != "signal"))
    co_return co_await ctx.SendError(MakeError(Code::kNotFound, "no route for " + ctx.path()));
  const bool want_post = op == "stdin" || op == "signal";
  if (want_post ? m != V::post : m != V::get) co_return co_await ctx.SendError(MethodNotAllowed(m));

  if (op.empty() || op == "stream") {
    HUTCH_FIELD(sb, mgr_->GetRunning(id));
    HUTCH_FIELD(pid, ParsePid(seg[4]));
    if (op == "stream") co_return co_await ProcessStream(ctx, *sb, *pid);
    HUTCH_FIELD(info, co_await GetProcess(*sb, *pid));
    co_return co_await ctx.SendJson(200, ProcessJson(*info));
  }

  HUTCH_FIELD(body, co_await ctx.ReadJson(cfg_.json_body_limit));
  if (op == "signal") {
    if (auto st = RejectUnknownFields(*body, {"signal"}); !st.ok())
      co_return co_await ctx.SendError(st.error());
    if (!body->contains("signal"))
      co_return co_await ctx.SendError(MakeError(Code::kInvalidRequest, "'signal' is required"));
    HUTCH_FIELD(sig, ParseSignal((*body)["signal"]));
    HUTCH_FIELD(sb, mgr_->GetRunning(id));
    HUTCH_FIELD(pid, ParsePid(seg[4]));
    HUTCH_FIELD(info, co_await SignalProcess(*sb, *pid, *sig));
    const json out = {{"pid", info->pid}, {"signal", *sig}};
    co_return co_await ctx.SendJson(200, out);
  }

  // stdin: {"text":"..."} or {"b64":"..."}, and/or {"eof":true}.
  if (auto st = RejectUnknownFields(*body, {"text", "b64", "eof"}); !st.ok())
    co_return co_await ctx.SendError(st.error());
  HUTCH_FIELD(text, OptString(*body, "text"));
  HUTCH_FIELD(b64, OptString(*body, "b64"));
  HUTCH_FIELD(eof, OptBool(*body, "eof"));
  if (text->has_value() && b64->has_value())
    co_return co_await ctx.SendError(
        MakeError(Code::kInvalidRequest, "give at most one of 'text' and 'b64'"));
  if (!text->has_value() && !b64->has_value() && !eof->value_or(false))
    co_return co_await ctx.SendError(MakeError(
        Code::kInvalidRequest, "nothing to do: give 'text' or 'b64', and/or \"eof\":true"));
  std::string data;
  if (*text) data = std::move(**text);
  if (*b64 && !Base64Decode(**b64, &data))
    co_return co_await ctx.SendError(MakeError(Code::kInvalidRequest, "'b64' is not valid base64"));
  HUTCH_FIELD(sb, mgr_->GetRunning(id));
  HUTCH_FIELD(pid, ParsePid(seg[4]));
  HUTCH_FIELD(info, co_await WriteProcessStdin(*sb, *pid, data, eof->value_or(false)));
  const json out = {{"pid", info->pid}, {"bytes", data.size()}, {"stdin_open", info->stdin_open}};
  co_return co_await ctx.SendJson(200, out);
}

asio::awaitable<void> V1Api::ProcessStream(HttpContext& ctx, std::shared_ptr<Sandbox> sb, int pid) {
  uint64_t from = 0;
  if (auto q = ctx.Query("from")) {
    HUTCH_FIELD(v, ParseOffset(*q, "from"));
    from = *v;
  }
  // A reconnecting EventSource repeats the original URL (with its old
  // `from`) and says where it got to in Last-Event-ID: that wins.
  if (std::string last = ctx.Header("Last-Event-ID"); !last.empty()) {
    HUTCH_FIELD(v, ParseOffset(last, "Last-Event-ID"));
    from = *v;
  }
  HUTCH_FIELD(attached, co_await ProcessFollower::Attach(sb, pid, from));
  std::shared_ptr<ProcessFollower> follower = std::move(attached).value();
  std::weak_ptr<ProcessFollower> weak = follower;
  ctx.WatchClose([weak] {
    if (auto f = weak.lock()) f->Interrupt();
  });
  GaugeHold open_stream{metrics_.open_streams};
  if (auto st = co_await ctx.BeginSse(); !st.ok()) {
    ctx.StopWatchingClose();
    co_return;
  }
  // `id:` of an output event is the offset just past its bytes, so a client
  // resumes exactly there with from=<id>. One splitter for both kinds: it is
  // flushed whenever the kind changes, so bytes leave in offset order and a
  // held-back partial character never sits behind a later event's id.
  uint64_t emitted = from;
  Utf8Splitter split;
  bool last_err = false;
  auto send_pieces = [&](bool is_err,
                         std::vector<Utf8Splitter::Piece> pieces) -> asio::awaitable<Status> {
    for (auto& p : pieces) {
      emitted += p.bytes.size();
      std::string ev = "id: " + std::to_string(emitted) + "\n" +
                       OutputEvent(is_err ? "stderr" : "stdout", p.text, p.bytes);
      if (auto st = co_await ctx.WriteChunk(ev); !st.ok()) co_return st;
    }
    co_return Status{};
  };
  const json start = {{"pid", pid}, {"from", from}};
  Status st = co_await ctx.WriteChunk(SseJsonEvent("start", start));
  while (st.ok()) {
    auto ev = co_await follower->NextFor(
        std::chrono::duration_cast<std::chrono::milliseconds>(cfg_.sse_ping_interval));
    if (!ev) {
      st = co_await ctx.WriteChunk(": ping\n\n");
      continue;
    }
    if (ev->kind == ProcessEvent::kStdout || ev->kind == ProcessEvent::kStderr) {
      const bool is_err = ev->kind == ProcessEvent::kStderr;
      if (is_err != last_err) st = co_await send_pieces(last_err, split.Flush());
      last_err = is_err;
      if (st.ok()) st = co_await send_pieces(is_err, split.Feed(ev->data));
      follower->Consumed(ev->data.size());
      continue;
    }
    if (ev->kind == ProcessEvent::kDropped) {
      st = co_await send_pieces(last_err, split.Flush());
      emitted = ev->offset;
      const json d = {
          {"from", ev->dropped_from}, {"oldest", ev->offset}, {"dropped_bytes", ev->dropped_bytes}};
      if (st.ok())
        st = co_await ctx.WriteChunk("id: " + std::to_string(emitted) + "\n" +
                                     SseJsonEvent("dropped", d));
      continue;
    }
    if (ev->kind == ProcessEvent::kExit) {
      st = co_await send_pieces(last_err, split.Flush());
      if (st.ok()) st = co_await ctx.WriteChunk(SseJsonEvent("exit", ExitJson(ev->exit)));
      if (st.ok()) st = co_await ctx.EndStream();
      ctx.StopWatchingClose();
      co_return;
    }
    // kError: the client left (interrupt), or the sandbox or the process
    // entry went away.
    if (ev->error.message != "client went away") {
      json err = {{"code", CodeName(ev->error.code)},
                  {"message", ev->error.message},
                  {"request_id", ctx.request_id()}};
      st = co_await ctx.WriteChunk(SseJsonEvent("error", err));
      if (st.ok()) st = co_await ctx.EndStream();
      ctx.StopWatchingClose();
      co_return;
    }
    break;
  }
  // The client is gone: dropping the follower stops following; the process
  // itself runs on.
  ctx.StopWatchingClose();
}

}  // namespace hutch::api
