// execd's code-interpreting API (/code, /code/context, /code/contexts):
// translated onto the code server a code-interpreter sandbox runs (the
// same one E2B's SDKs talk to, api/common/code_client). A run streams
// execd's events: bare JSON objects each followed by a blank line —
// `init` (the context's id, which DELETE /code?id= interrupts), `stdout`,
// `stderr`, `result` (a MIME map, text/plain as `text`), `error` (ename,
// evalue, traceback lines), `execution_count`, `execution_complete`, and
// `ping` while quiet. A client that goes away interrupts the run; the
// context keeps its state.
#include <chrono>

#include "api/common/code_client.h"
#include "api/opensandbox/command_stream.h"
#include "api/opensandbox/osb_api.h"

namespace hutch::api::opensandbox {

namespace {

using nlohmann::json;

// E2B's result fields back to the MIME keys execd uses.
json ResultsOf(const json& r) {
  static const std::pair<const char*, const char*> kMime[] = {
      {"text", "text"},
      {"html", "text/html"},
      {"markdown", "text/markdown"},
      {"svg", "image/svg+xml"},
      {"png", "image/png"},
      {"jpeg", "image/jpeg"},
      {"pdf", "application/pdf"},
      {"latex", "text/latex"},
      {"json", "application/json"},
      {"javascript", "application/javascript"},
  };
  json out = json::object();
  for (const auto& [field, mime] : kMime)
    if (r.contains(field)) out[mime] = r[field];
  if (r.contains("extra") && r["extra"].is_object())
    for (const auto& [k, v] : r["extra"].items()) out[k] = v;
  return out;
}

// "line1\nline2" → ["line1", "line2"] (execd's traceback is a list).
json TracebackLines(const std::string& tb) {
  json lines = json::array();
  size_t at = 0;
  while (at <= tb.size()) {
    const size_t nl = tb.find('\n', at);
    lines.push_back(tb.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return lines;
}

json ErrorEvent(const std::string& name, const std::string& value, const json& traceback) {
  return {{"type", "error"},
          {"error", {{"ename", name}, {"evalue", value}, {"traceback", traceback}}},
          {"timestamp", NowMs()}};
}

json ResultEvent(const json& r) {
  return {{"type", "result"}, {"results", ResultsOf(r)}, {"timestamp", NowMs()}};
}

json CountEvent(int n) {
  return {{"type", "execution_count"}, {"execution_count", n}, {"timestamp", NowMs()}};
}

}  // namespace

asio::awaitable<void> OpenSandboxApi::RunCode(HttpContext& ctx, std::shared_ptr<Sandbox> sb) {
  auto body = co_await ctx.ReadJson(json_limit_);
  if (!body.ok()) co_return co_await SendError(ctx, body.error());
  if (!body->is_object() || !body->contains("code") || !(*body)["code"].is_string()) {
    const Error bad = MakeError(Code::kInvalidRequest, "'code' must be a string");
    co_return co_await SendError(ctx, bad);
  }
  // raw_text: results' text/plain as the kernel made it, as execd sends
  // it (a str result keeps its quotes; E2B's clients get it unquoted).
  json req = {{"code", (*body)["code"]}, {"raw_text", true}};
  // No context (or one without an id): that language's default context.
  std::string language = "python";
  if (body->contains("context") && (*body)["context"].is_object()) {
    const json& c = (*body)["context"];
    if (c.contains("id") && c["id"].is_string() && !c["id"].get<std::string>().empty()) {
      if (!CodeClient::ValidContextId(c["id"])) {
        const Error bad = MakeError(Code::kNotFound, "context not found");
        co_return co_await SendError(ctx, bad);
      }
      req["context_id"] = c["id"];
    } else if (c.contains("language") && c["language"].is_string()) {
      language = c["language"];
    }
  }
  if (!req.contains("context_id")) req["language"] = language;
  const auto started = std::chrono::steady_clock::now();
  auto run = co_await code_.Execute(sb->rec.id, req);
  if (!run.ok()) co_return co_await SendError(ctx, run.error());
  std::unique_ptr<CodeRun> r = std::move(run).value();
  CodeRun* raw = r.get();
  ctx.WatchClose([raw] { raw->Cancel(); });
  CommandStream out(ctx);
  Status st = co_await out.Begin();
  const json init = InitEvent(r->context_id());
  if (st.ok()) st = co_await out.Send(init);
  while (st.ok()) {
    auto line = co_await r->Next();
    if (!line.ok() || !*line) {
      if (!line.ok() && line.error().code == Code::kUnavailable && !ctx.keep_alive()) {
        st = line.error();  // the client is gone: nothing more to send it
        break;
      }
      const std::string why = line.ok() ? "the code interpreter ended the run without finishing it"
                                        : line.error().message;
      const json ev = ErrorEvent("UnexpectedEndOfExecution", why, json::array());
      st = co_await out.Send(ev);
      break;
    }
    const json& j = **line;
    const std::string type = j.value("type", "");
    if (type == "stdout" || type == "stderr") {
      const json ev = OutputEvent(type == "stderr", j.value("text", ""));
      st = co_await out.Send(ev);
    } else if (type == "result") {
      const json ev = ResultEvent(j);
      st = co_await out.Send(ev);
    } else if (type == "error") {
      const json ev = ErrorEvent(j.value("name", ""), j.value("value", ""),
                                 TracebackLines(j.value("traceback", "")));
      st = co_await out.Send(ev);
    } else if (type == "number_of_executions") {
      const json ev = CountEvent(j.value("execution_count", 0));
      st = co_await out.Send(ev);
    } else if (type == "keepalive") {
      const json ev = PingEvent();
      st = co_await out.Send(ev);
    } else if (type == "end_of_execution") {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
      const json ev = CompleteEvent(ms);
      st = co_await out.Send(ev);
      break;
    }
  }
  ctx.StopWatchingClose();
  if (st.ok()) co_await out.End();
}

asio::awaitable<void> OpenSandboxApi::InterruptCode(HttpContext& ctx, std::shared_ptr<Sandbox> sb) {
  const std::string id = ctx.Query("id").value_or("");
  if (!CodeClient::ValidContextId(id)) {
    const Error bad = MakeError(Code::kInvalidRequest, "'id' (the run's context id) is required");
    co_return co_await SendError(ctx, bad);
  }
  const std::string target = "/contexts/" + id + "/interrupt";
  auto r = co_await code_.Call(sb->rec.id, http::verb::post, target);
  if (!r.ok()) co_return co_await SendError(ctx, r.error());
  co_await ctx.SendEmpty(200);
}

asio::awaitable<void> OpenSandboxApi::CodeContexts(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                                   std::vector<std::string> s) {
  const std::string& id = sb->rec.id;
  // s: "code", "context" | "contexts" [, {ctx}]
  if (s.size() == 2 && s[1] == "context") {  // POST: create
    auto body = co_await ctx.ReadJson(json_limit_);
    if (!body.ok()) co_return co_await SendError(ctx, body.error());
    json req = json::object();
    req["language"] = body->is_object() ? body->value("language", "python") : "python";
    if (body->is_object() && body->contains("cwd") && (*body)["cwd"].is_string())
      req["cwd"] = (*body)["cwd"];
    auto r = co_await code_.Call(id, http::verb::post, "/contexts", &req);
    if (!r.ok()) co_return co_await SendError(ctx, r.error());
    co_return co_await ctx.SendJson(200, *r);
  }
  if (s.size() == 3) {
    if (!CodeClient::ValidContextId(s[2])) {
      const Error bad = MakeError(Code::kNotFound, "context " + s[2] + " not found");
      co_return co_await SendError(ctx, bad);
    }
    if (ctx.method() == http::verb::delete_) {
      const std::string target = "/contexts/" + s[2];
      auto r = co_await code_.Call(id, http::verb::delete_, target);
      if (!r.ok()) co_return co_await SendError(ctx, r.error());
      co_return co_await ctx.SendEmpty(200);
    }
  }
  // The rest reads the server's list (it has no route for one context).
  auto all = co_await code_.Call(id, http::verb::get, "/contexts");
  if (!all.ok()) co_return co_await SendError(ctx, all.error());
  const json list = all->is_array() ? *all : json::array();
  if (s.size() == 3) {  // GET one context
    for (const auto& c : list)
      if (c.value("id", "") == s[2]) co_return co_await ctx.SendJson(200, c);
    const Error missing = MakeError(Code::kNotFound, "context " + s[2] + " not found");
    co_return co_await SendError(ctx, missing);
  }
  // /code/contexts?language=L: list, or delete every context of L.
  const std::string language = ctx.Query("language").value_or("");
  json picked = json::array();
  for (const auto& c : list)
    if (language.empty() || c.value("language", "") == language) picked.push_back(c);
  if (ctx.method() == http::verb::get) co_return co_await ctx.SendJson(200, picked);
  if (language.empty()) {
    const Error bad = MakeError(Code::kInvalidRequest, "'language' is required");
    co_return co_await SendError(ctx, bad);
  }
  for (const auto& c : picked) {
    const std::string target = "/contexts/" + c.value("id", "");
    auto r = co_await code_.Call(id, http::verb::delete_, target);
    if (!r.ok() && r.error().code != Code::kNotFound) co_return co_await SendError(ctx, r.error());
  }
  co_await ctx.SendEmpty(200);
}

}  // namespace hutch::api::opensandbox
