// The HTTP front of hutchd: auth, request ids, routing, and the /v1
// dialect's handlers. Dialect handlers only translate wire formats into
// SandboxManager / ExecSession / file operations.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "api/http_context.h"
#include "core/sandbox_manager.h"

namespace hutch::api {

struct ApiConfig {
  std::vector<std::string> api_keys;
  size_t json_body_limit = 1 << 20;
  size_t exec_output_cap = 16 << 20;
  std::chrono::seconds sse_ping_interval{15};
};

struct Metrics {
  uint64_t http_requests = 0;
  uint64_t http_errors_5xx = 0;
  uint64_t sandboxes_created = 0;
  uint64_t sandbox_create_failures = 0;
  uint64_t execs = 0;
  uint64_t open_streams = 0;
};

class Api {
 public:
  Api(ApiConfig cfg, SandboxManager* mgr) : cfg_(std::move(cfg)), mgr_(mgr) {}
  // Handles one request; the response has been sent when it returns.
  asio::awaitable<void> Handle(HttpContext& ctx);

 private:
  bool Authorized(const HttpContext& ctx) const;
  asio::awaitable<void> RouteV1(HttpContext& ctx, const std::vector<std::string>& seg);

  // /v1 handlers (v1_*.cc)
  asio::awaitable<void> CreateSandbox(HttpContext& ctx);
  asio::awaitable<void> ListSandboxes(HttpContext& ctx);
  asio::awaitable<void> GetSandbox(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> DeleteSandbox(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> SetTtl(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> SandboxMetrics(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Exec(HttpContext& ctx, const std::string& id, bool stream);
  asio::awaitable<void> FileGet(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> FilePut(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> FileDelete(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> FileList(HttpContext& ctx, const std::string& id, bool stat_only);
  asio::awaitable<void> FileMkdir(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> FileMove(HttpContext& ctx, const std::string& id);
  // /processes[/{pid}[/stream|stdin|signal]] (v1_processes.cc)
  asio::awaitable<void> Processes(HttpContext& ctx, const std::string& id, const std::vector<std::string>& seg);
  asio::awaitable<void> ProcessStream(HttpContext& ctx, std::shared_ptr<Sandbox> sb, int pid);
  // /pty, a WebSocket (v1_pty.cc)
  asio::awaitable<void> Pty(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> ServeMetrics(HttpContext& ctx);

  ApiConfig cfg_;
  SandboxManager* mgr_;
  Metrics metrics_;
};

}  // namespace hutch::api
