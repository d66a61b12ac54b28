// The tools hutch offers over MCP (docs/mcp.md): each a thin call onto the
// core (SandboxManager, ExecSession, file operations, the code
// interpreter's client), with an input schema and a description an agent
// can act on. A failure is a tool result with isError and hutch's error
// code, never a protocol error: the agent reads it and can recover.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/common/code_client.h"
#include "auth/principal.h"
#include "common/result.h"
#include "core/sandbox_manager.h"

namespace hutch::api::mcp {

using nlohmann::json;
namespace asio = boost::asio;

// Stops a running tool: the client cancelled the request, closed its
// stream, or the session ended. A tool sets the hook while it has
// something to stop (an exec session, a code run).
class CancelSignal {
 public:
  void Fire() {
    fired_ = true;
    if (hook_) hook_();
  }
  void OnFire(std::function<void()> hook) {
    hook_ = std::move(hook);
    if (fired_ && hook_) hook_();
  }
  void Clear() { hook_ = nullptr; }
  bool fired() const { return fired_; }

 private:
  bool fired_ = false;
  std::function<void()> hook_;
};

// Sets a cancel hook that points into the caller's frame for that frame's
// life.
class CancelHook {
 public:
  CancelHook(CancelSignal& c, std::function<void()> hook) : c_(c) { c_.OnFire(std::move(hook)); }
  ~CancelHook() { c_.Clear(); }
  CancelHook(const CancelHook&) = delete;
  CancelHook& operator=(const CancelHook&) = delete;

 private:
  CancelSignal& c_;
};

// In a tool handler: a field of the arguments, or the tool's error result.
#define MCP_FIELD(var, expr) \
  auto var = (expr);         \
  if (!var.ok()) co_return var.error();

// What a tool gets besides its arguments.
struct ToolCall {
  auth::Principal who;
  std::string base_url;  // "http://host:port" as the client reached hutchd
  // Set when the client asked for progress (a progressToken) and the
  // answer is a stream: `progress` must grow from call to call.
  std::function<asio::awaitable<void>(double progress, std::string message)> progress;
  // Something on the stream now and then, so idle proxies keep it open.
  std::function<asio::awaitable<void>()> keepalive;
  std::shared_ptr<CancelSignal> cancel = std::make_shared<CancelSignal>();
};

// A tool's answer before it becomes MCP content: the text an agent reads,
// the structured object, and images (base64) of a code run.
struct ToolOutput {
  std::string text;
  json structured = json::object();
  std::vector<json> images;  // {"type":"image","data","mimeType"}
};

class Tools {
 public:
  Tools(SandboxManager* mgr, CodeClient* code) : mgr_(mgr), code_(code) {}
  // tools/list for this key (those it may call).
  json List(const auth::Principal& who) const;
  // tools/call: the result object ({content, structuredContent, isError}).
  // Unknown tool names and arguments that fail their schema are results
  // with isError too (code invalid_request), as the agent can fix them.
  asio::awaitable<json> Call(std::string name, json args, ToolCall& call);
  static const std::vector<std::string>& Names();

 private:
  using Handler = asio::awaitable<Result<ToolOutput>> (Tools::*)(const json&, ToolCall&);
  static Handler HandlerOf(const std::string& name);
  // Sandbox lifecycle (mcp_tool_sandboxes.cc)
  asio::awaitable<Result<ToolOutput>> SandboxCreate(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxList(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxGet(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxKill(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxPause(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxResume(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxSnapshot(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> SandboxFork(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> PortUrl(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> TemplateList(const json& a, ToolCall& call);
  // Commands and code (mcp_tool_exec.cc, mcp_tool_code.cc)
  asio::awaitable<Result<ToolOutput>> Exec(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> RunCode(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> Run(const json& a, ToolCall& call);
  // Files (mcp_tool_files.cc)
  asio::awaitable<Result<ToolOutput>> FileRead(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> FileWrite(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> FileList(const json& a, ToolCall& call);
  asio::awaitable<Result<ToolOutput>> FileRemove(const json& a, ToolCall& call);

  // The running sandbox `a.sandbox_id` names, if this key may see it (the
  // same not_found as an unknown id otherwise).
  Result<std::shared_ptr<Sandbox>> RunningSandbox(const json& a, const ToolCall& call);
  Status Visible(const std::string& id, const ToolCall& call);
  // One command to its end, with progress; shared by exec and run.
  asio::awaitable<Result<ToolOutput>> ExecIn(std::shared_ptr<Sandbox> sb, const json& a,
                                             ToolCall& call);
  // One code run to its end; shared by run_code and run.
  asio::awaitable<Result<ToolOutput>> CodeIn(const std::string& id, const json& a, ToolCall& call);

  SandboxManager* mgr_;
  CodeClient* code_;
};

// A required string argument (non-empty).
Result<std::string> RequiredString(const json& a, const char* key);

// Valid UTF-8 of any bytes (invalid sequences become U+FFFD): tool text
// goes into JSON strings.
std::string LossyUtf8(std::string_view bytes);

}  // namespace hutch::api::mcp
