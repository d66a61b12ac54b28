// run_code, and run's code form: one execution on the sandbox's code
// interpreter (CodeClient), gathered into what an agent reads: printed
// output and result text as text, PNG and JPEG results (matplotlib charts)
// as MCP image content, tables (DataFrames) as their text form, an
// exception with its traceback. State stays in the context between calls.
#include "api/common/json_fields.h"
#include "api/mcp/mcp_tools.h"

namespace hutch::api::mcp {

namespace {

// The forms of a result line other than its bookkeeping fields.
std::vector<std::string> Formats(const json& line) {
  std::vector<std::string> f;
  for (const auto& [k, v] : line.items())
    if (k != "type" && k != "is_main_result" && k != "extra" && !v.is_null()) f.push_back(k);
  return f;
}

}  // namespace

asio::awaitable<Result<ToolOutput>> Tools::CodeIn(const std::string& id, const json& a,
                                                  ToolCall& call) {
  MCP_FIELD(code, RequiredString(a, "code"));
  MCP_FIELD(language, OptString(a, "language"));
  MCP_FIELD(context, OptString(a, "context_id"));
  MCP_FIELD(timeout, OptInt(a, "timeout_seconds", 1, 86400));
  MCP_FIELD(env, OptEnvMap(a, "env"));
  if (*language && *context)
    co_return MakeError(Code::kInvalidRequest,
                        "give 'context_id' or 'language', not both (a context has its language)");
  json req = {{"code", *code}};
  if (*language) req["language"] = **language;
  if (*context) {
    if (!CodeClient::ValidContextId(**context))
      co_return MakeError(Code::kInvalidRequest, "'context_id' is not a context id");
    req["context_id"] = **context;
  }
  if (*env) req["env_vars"] = **env;
  if (call.cancel->fired()) co_return MakeError(Code::kUnavailable, "the request was cancelled");
  auto started = co_await code_->Execute(id, req);
  if (!started.ok()) co_return started.error();
  std::unique_ptr<CodeRun> run = std::move(started).value();
  if (*timeout)
    run->SetDeadline(std::chrono::steady_clock::now() + std::chrono::seconds(**timeout));
  CodeRun* raw = run.get();
  CancelHook hook(*call.cancel, [raw] { raw->Cancel(); });

  ToolOutput o;
  std::string out, err, results_text;
  json results = json::array();
  json error = nullptr;
  double sent = 0;
  while (true) {
    auto line = co_await run->Next();
    if (!line.ok() || !*line) {
      if (call.cancel->fired())
        co_return MakeError(Code::kUnavailable,
                            "the request was cancelled; the run was interrupted");
      if (!line.ok() && line.error().code == Code::kAgentTimeout) {
        error = {{"name", "TimeoutError"},
                 {"value",
                  "the run passed timeout_seconds and was interrupted; the context "
                  "keeps its state"},
                 {"traceback", ""}};
      } else {
        error = {{"name", "ExecutionAborted"},
                 {"value", line.ok() ? "the code interpreter ended the run without finishing it"
                                     : line.error().message},
                 {"traceback", ""}};
      }
      break;
    }
    const json& j = **line;
    const std::string type = j.value("type", "");
    if (type == "end_of_execution") break;
    if (type == "keepalive") {
      if (call.keepalive) co_await call.keepalive();
    } else if (type == "stdout" || type == "stderr") {
      const std::string text = j.value("text", "");
      (type == "stdout" ? out : err) += text;
      if (call.progress && !text.empty()) {
        sent += static_cast<double>(text.size());
        co_await call.progress(sent, text);
      }
    } else if (type == "result") {
      json r = {{"formats", Formats(j)}, {"is_main_result", j.value("is_main_result", false)}};
      // Text an agent can read: the plain form (a DataFrame's is its
      // table), else markdown, else the JSON form.
      std::string text;
      if (j.contains("text") && j["text"].is_string()) text = j["text"];
      else if (j.contains("markdown") && j["markdown"].is_string()) text = j["markdown"];
      else if (j.contains("json") && !j["json"].is_null()) text = j["json"].dump();
      if (!text.empty()) {
        r["text"] = text;
        results_text += text + "\n";
      }
      for (const auto& [key, mime] : {std::pair{"png", "image/png"}, {"jpeg", "image/jpeg"}})
        if (j.contains(key) && j[key].is_string())
          o.images.push_back({{"type", "image"}, {"data", j[key]}, {"mimeType", mime}});
      if (j.contains("chart") && !j["chart"].is_null()) r["chart"] = j["chart"];
      results.push_back(std::move(r));
    } else if (type == "error") {
      error = {{"name", j.value("name", "")},
               {"value", j.value("value", "")},
               {"traceback", j.value("traceback", "")}};
    }
  }
  o.structured = {{"stdout", out}, {"stderr", err}, {"results", results}, {"error", error}};
  o.text = out;
  if (!err.empty()) o.text += (o.text.empty() ? "" : "\n") + std::string("[stderr]\n") + err;
  if (!results_text.empty()) o.text += (o.text.empty() ? "" : "\n") + results_text;
  if (!o.images.empty()) o.text += "[" + std::to_string(o.images.size()) + " image(s) attached]\n";
  if (!error.is_null()) {
    o.text += "Error: " + error["name"].get<std::string>() + ": " +
              error["value"].get<std::string>() + "\n" + error["traceback"].get<std::string>();
  }
  if (o.text.empty()) o.text = "(no output)";
  co_return o;
}

asio::awaitable<Result<ToolOutput>> Tools::RunCode(const json& a, ToolCall& call) {
  MCP_FIELD(id, RequiredString(a, "sandbox_id"));
  if (auto st = Visible(*id, call); !st.ok()) co_return st.error();
  json c = a;
  c.erase("sandbox_id");
  co_return co_await CodeIn(*id, c, call);
}

}  // namespace hutch::api::mcp
