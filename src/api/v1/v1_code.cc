// /v1/sandboxes/{id}/code and /code/contexts: the code interpreter of a
// sandbox made from the code-interpreter template, translated onto its
// server (CodeClient). POST /code answers SSE: `stdout`, `stderr`,
// `result`, `error` with E2B's fields, then `end`.
//
// A client that goes away, or a timeout_ms that fires, closes the
// connection to the server, which interrupts the run; the context keeps
// its state.
#include <chrono>

#include "api/common/code_client.h"
#include "api/common/exec_body.h"
#include "api/v1/v1_api.h"

namespace hutch::api {

namespace {

using nlohmann::json;

// {code, language?, context_id?, env_vars?, timeout_ms?} → the server's
// /execute body and the timeout (0: none).
Result<std::pair<json, int64_t>> ParseCodeBody(const json& b) {
  if (!b.is_object()) return MakeError(Code::kInvalidRequest, "the body must be a JSON object");
  for (const auto& [k, v] : b.items())
    if (k != "code" && k != "language" && k != "context_id" && k != "env_vars" && k != "timeout_ms")
      return MakeError(Code::kInvalidRequest, "unknown field '" + k + "'");
  if (!b.contains("code") || !b["code"].is_string())
    return MakeError(Code::kInvalidRequest, "'code' must be a string");
  json out = {{"code", b["code"]}};
  if (b.contains("language")) {
    if (!b["language"].is_string() || b["language"].get<std::string>().empty())
      return MakeError(Code::kInvalidRequest, "'language' must be a non-empty string");
    out["language"] = b["language"];
  }
  if (b.contains("context_id")) {
    if (!b["context_id"].is_string() || !CodeClient::ValidContextId(b["context_id"]))
      return MakeError(Code::kInvalidRequest, "'context_id' is not a context id");
    if (out.contains("language"))
      return MakeError(Code::kInvalidRequest,
                       "give 'context_id' or 'language', not both (a context has its language)");
    out["context_id"] = b["context_id"];
  }
  if (b.contains("env_vars")) {
    if (!b["env_vars"].is_object())
      return MakeError(Code::kInvalidRequest, "'env_vars' must be an object of strings");
    for (const auto& [k, v] : b["env_vars"].items())
      if (!v.is_string() || k.empty())
        return MakeError(Code::kInvalidRequest, "'env_vars' must be an object of strings");
    out["env_vars"] = b["env_vars"];
  }
  int64_t timeout_ms = 0;
  if (b.contains("timeout_ms")) {
    if (!b["timeout_ms"].is_number_integer() || b["timeout_ms"].get<int64_t>() < 0)
      return MakeError(Code::kInvalidRequest, "'timeout_ms' must be a non-negative integer");
    timeout_ms = b["timeout_ms"].get<int64_t>();
  }
  return std::make_pair(std::move(out), timeout_ms);
}

}  // namespace

asio::awaitable<void> V1Api::RunCode(HttpContext& ctx, const std::string& id) {
  auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
  if (!body.ok()) co_return co_await ctx.SendError(body.error());
  auto parsed = ParseCodeBody(*body);
  if (!parsed.ok()) co_return co_await ctx.SendError(parsed.error());
  auto run = co_await code_.Execute(id, parsed->first);
  if (!run.ok()) co_return co_await ctx.SendError(run.error());
  std::unique_ptr<CodeRun> r = std::move(run).value();
  const int64_t timeout_ms = parsed->second;
  if (timeout_ms > 0)
    r->SetDeadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
  CodeRun* raw = r.get();
  ctx.WatchClose([raw] { raw->Cancel(); });

  GaugeHold open_stream{metrics_.open_streams};
  if (auto st = co_await ctx.BeginSse(); !st.ok()) {
    ctx.StopWatchingClose();
    co_return;
  }
  json end = json::object();
  Status st;
  while (st.ok()) {
    auto line = co_await r->Next();
    if (!line.ok() || !*line) {
      if (!line.ok() && line.error().code == Code::kUnavailable && !ctx.keep_alive())
        break;  // the client is gone
      // The run did not finish: its timeout fired, the connection to the
      // server broke, or the server ended it without end_of_execution (its
      // kernel died). Said so, then the end.
      json err = {{"name", "UnexpectedEndOfExecution"},
                  {"value", "the code interpreter ended the run without finishing it"},
                  {"traceback", ""}};
      if (!line.ok() && line.error().code == Code::kAgentTimeout) {
        err["name"] = "TimeoutError";
        err["value"] = "the execution ran past timeout_ms (" + std::to_string(timeout_ms) +
                       " ms) and was interrupted; the context keeps its state";
        end["timed_out"] = true;
      } else if (!line.ok()) {
        err["name"] = "ExecutionAborted";
        err["value"] = line.error().message;
      }
      st = co_await ctx.WriteChunk(SseJsonEvent("error", err));
      if (st.ok()) st = co_await ctx.WriteChunk(SseJsonEvent("end", end));
      if (st.ok()) st = co_await ctx.EndStream();
      break;
    }
    json& j = **line;
    const std::string type = j.value("type", "");
    j.erase("type");
    if (type == "stdout" || type == "stderr" || type == "result" || type == "error") {
      st = co_await ctx.WriteChunk(SseJsonEvent(type.c_str(), j));
    } else if (type == "number_of_executions") {
      end["execution_count"] = j.value("execution_count", 0);
    } else if (type == "keepalive") {
      st = co_await ctx.WriteChunk(": ping\n\n");
    } else if (type == "end_of_execution") {
      st = co_await ctx.WriteChunk(SseJsonEvent("end", end));
      if (st.ok()) st = co_await ctx.EndStream();
      break;
    }
  }
  ctx.StopWatchingClose();
}

asio::awaitable<void> V1Api::CodeContexts(HttpContext& ctx, const std::string& id,
                                          std::string context_id, std::string action) {
  using V = http::verb;
  if (!context_id.empty() && !CodeClient::ValidContextId(context_id)) {
    const Error bad = MakeError(Code::kNotFound, "Context " + context_id + " not found");
    co_return co_await ctx.SendError(bad);
  }
  if (context_id.empty() && ctx.method() == V::get) {
    auto r = co_await code_.Call(id, V::get, "/contexts");
    if (!r.ok()) co_return co_await ctx.SendError(r.error());
    json items = json::object();
    items["items"] = r->is_array() ? *r : json::array();
    co_return co_await ctx.SendJson(200, items);
  }
  if (context_id.empty()) {  // POST: create
    auto body = co_await ctx.ReadJson(cfg_.json_body_limit);
    if (!body.ok()) co_return co_await ctx.SendError(body.error());
    json req = json::object();
    for (const auto& [k, v] : body->items()) {
      if ((k != "language" && k != "cwd") || !v.is_string()) {
        const Error bad =
            MakeError(Code::kInvalidRequest,
                      "a context takes 'language' and 'cwd' (strings); got '" + k + "'");
        co_return co_await ctx.SendError(bad);
      }
      req[k] = v;
    }
    auto r = co_await code_.Call(id, V::post, "/contexts", &req);
    if (!r.ok()) co_return co_await ctx.SendError(r.error());
    co_return co_await ctx.SendJson(201, *r);
  }
  const std::string target = "/contexts/" + context_id + (action.empty() ? "" : "/" + action);
  auto r = co_await code_.Call(id, action.empty() ? V::delete_ : V::post, target);
  if (!r.ok()) co_return co_await ctx.SendError(r.error());
  co_await ctx.SendEmpty(204);
}

}  // namespace hutch::api
