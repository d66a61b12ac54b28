// /mcp: the Model Context Protocol over its Streamable HTTP transport
// (docs/mcp.md). POST carries JSON-RPC messages (a tools/call is answered
// as an event stream: progress notifications, then the result), GET opens
// the session's server-to-client stream, DELETE ends a session. Keys are
// /v1's (Authorization: Bearer), with their tenant scope and an optional
// per-key list of tools (keys file `mcp_tools=`). The tools are in
// mcp_tools.h; `hutch mcp` (src/cli) bridges stdio clients to this route.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "api/common/code_client.h"
#include "api/mcp/mcp_protocol.h"
#include "api/mcp/mcp_sessions.h"
#include "api/mcp/mcp_tools.h"
#include "auth/credentials.h"
#include "core/sandbox_manager.h"
#include "http/router.h"

namespace hutch::api::mcp {

struct McpConfig {
  // A POST body: file_write takes whole files (8 MiB as base64).
  size_t body_limit = 12 << 20;
  std::chrono::seconds ping_interval{15};
};

class McpApi {
 public:
  McpApi(McpConfig cfg, SandboxManager* mgr, auth::Credentials* creds)
      : cfg_(cfg), mgr_(mgr), creds_(creds), code_(mgr), tools_(mgr, &code_) {}
  void Register(Router& r);
  size_t sessions() const { return sessions_.size(); }

 private:
  asio::awaitable<bool> Admit(HttpContext& ctx);
  asio::awaitable<void> Post(HttpContext& ctx);
  asio::awaitable<void> Get(HttpContext& ctx);
  asio::awaitable<void> Delete(HttpContext& ctx);
  // The session a request names (Mcp-Session-Id), or the answer that it
  // has none (400) or an unknown one (404) has been sent.
  asio::awaitable<std::shared_ptr<Session>> SessionOf(HttpContext& ctx);
  asio::awaitable<void> Initialize(HttpContext& ctx, const Message& m);
  // Every request but initialize and a streamed tools/call.
  asio::awaitable<json> Answer(HttpContext& ctx, Session& s, const Message& m);
  // A tools/call answered as an event stream (progress, then the result).
  asio::awaitable<void> StreamToolCall(HttpContext& ctx, std::shared_ptr<Session> s,
                                       const Message& m);
  // Runs the tool a tools/call names, cancellable while it runs.
  asio::awaitable<json> CallTool(HttpContext& ctx, Session& s, const Message& m, ToolCall& call);
  void Notify(Session& s, const Message& m);
  ToolCall MakeCall(HttpContext& ctx) const;
  // An HTTP-level refusal with a JSON-RPC error body.
  asio::awaitable<void> Refuse(HttpContext& ctx, int status, int code, const std::string& why);

  McpConfig cfg_;
  SandboxManager* mgr_;
  auth::Credentials* creds_;
  CodeClient code_;
  Tools tools_;
  SessionTable sessions_;
};

}  // namespace hutch::api::mcp
