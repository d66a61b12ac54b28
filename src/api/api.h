// The HTTP front of hutchd: auth, request ids, routing, and the /v1
// dialect's handlers. Dialect handlers only translate wire formats into
// SandboxManager / ExecSession / file operations.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "api/api_metrics.h"
#include "api/e2b/e2b_api.h"
#include "api/opensandbox/osb_api.h"
#include "api/http_context.h"
#include "api/port_proxy.h"
#include "api/rate_limiter.h"
#include "core/sandbox_manager.h"

namespace hutch::api {

struct ApiConfig {
  // SHA-256 hex of each accepted API key (keys themselves are not kept).
  std::vector<std::string> api_key_hashes;
  size_t json_body_limit = 1 << 20;
  size_t exec_output_cap = 16 << 20;
  std::chrono::seconds sse_ping_interval{15};
  // Per-key token bucket on /v1 (0 = off): requests a second, bucket size.
  double rate_limit_rps = 50;
  double rate_limit_burst = 100;
  // What this server can do, as /healthz reports it (driver, memory
  // snapshots, the CRIU probe's finding).
  nlohmann::json capabilities = nlohmann::json::object();
  // OpenSandbox image URI -> template (--opensandbox-images over the defaults).
  opensandbox::ImageTable opensandbox_images = opensandbox::ImageTable::Defaults();
};

// 405 for a known path asked with the wrong method.
Error MethodNotAllowed(http::verb v);

class Api {
 public:
  Api(ApiConfig cfg, SandboxManager* mgr)
      : cfg_(std::move(cfg)),
        mgr_(mgr),
        limiter_(cfg_.rate_limit_rps, cfg_.rate_limit_burst),
        ports_(mgr),
        e2b_(mgr, cfg_.json_body_limit, [this](const std::string& key_hash) { return RateLimitWait(key_hash); }),
        osb_(mgr, cfg_.json_body_limit, [this](const std::string& key_hash) { return RateLimitWait(key_hash); }) {
    osb_.SetImages(cfg_.opensandbox_images);
  }
  // Handles one request; the response has been sent when it returns.
  // Counts it, logs its access line, and answers 500 if a handler throws.
  asio::awaitable<void> Handle(HttpContext& ctx);
  // Replaces the accepted keys (SIGHUP reload).
  void SetKeyHashes(std::vector<std::string> hashes) { cfg_.api_key_hashes = std::move(hashes); }
  // SHA-256 hex of the request's bearer key; "" without one.
  static std::string BearerKeyHash(const HttpContext& ctx);
  // A request refused before it could be parsed (HttpServer answers it
  // itself): counted like any other error answer.
  void CountMalformedRequest(int status, Code code);

 private:
  asio::awaitable<void> Dispatch(HttpContext& ctx);
  bool Authorized(const HttpContext& ctx) const;
  // The hash of the accepted key `presented` is (or stands for, in the
  // E2B dialect's `e2b_<hex>` form); "" when none matches.
  std::string MatchKeyHash(const std::vector<std::string>& candidates) const;
  asio::awaitable<void> RouteE2b(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> RouteOpenSandbox(HttpContext& ctx, const std::vector<std::string>& seg);
  // Takes a token of the key (by its hash); 0 if allowed, else Retry-After seconds.
  int RateLimitWait(const std::string& key_hash);
  asio::awaitable<void> RouteV1(HttpContext& ctx, const std::vector<std::string>& seg);

  // /v1 handlers (v1_*.cc)
  asio::awaitable<void> CreateSandbox(HttpContext& ctx);
  asio::awaitable<void> ListSandboxes(HttpContext& ctx);
  asio::awaitable<void> GetSandbox(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> DeleteSandbox(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> SetTtl(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> PauseResume(HttpContext& ctx, const std::string& id, bool pause);
  // v1_snapshots.cc
  asio::awaitable<void> CreateSnapshot(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> ForkSandbox(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> RouteSnapshots(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> SandboxMetrics(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> GetNetwork(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> PutNetwork(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Exec(HttpContext& ctx, const std::string& id, bool stream);
  // The running sandbox; a paused one is resumed first when the request
  // asked for it ("auto_resume": true), else refused with 409 conflict.
  Result<std::shared_ptr<Sandbox>> RunningOrResumed(const std::string& id, bool auto_resume);
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
  // Exposed ports (v1_ports.cc): /v1/sandboxes/{id}/ports/{port}/...; the
  // E2B forms (a Host of the form {port}-{id}.<domain>, and /e2b requests
  // with an E2b-Sandbox-Port other than envd's) also accept the sandbox's
  // own tokens. Their targets go on raw, so the router skips its URL
  // checks for them (IsV1PortsPath, IsE2bPortRequest).
  static bool IsV1PortsPath(const std::vector<std::string>& seg);
  static bool IsE2bPortRequest(const HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> Ports(HttpContext& ctx, const std::string& id, const std::vector<std::string>& seg);
  asio::awaitable<void> PortsByHost(HttpContext& ctx, const std::string& id, const std::string& port_text);
  asio::awaitable<void> PortsByE2bHeader(HttpContext& ctx);
  asio::awaitable<void> PortsE2b(HttpContext& ctx, const std::string& id, const std::string& port_text,
                                 std::string target, std::string prefix);
  // /v1/volumes[/{name}[/fs[/op]]] (v1_volumes.cc)
  asio::awaitable<void> RouteVolumes(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> CreateVolume(HttpContext& ctx);
  asio::awaitable<void> VolumeFileOp(HttpContext& ctx, const std::string& name, const std::string& op);
  asio::awaitable<void> VolumeFileGet(HttpContext& ctx, const std::string& name);
  asio::awaitable<void> VolumeFilePut(HttpContext& ctx, const std::string& name);
  nlohmann::json VolumeJson(const VolumeRecord& r);
  // /v1/templates[/{name}] and /v1/template-aliases[/{name}] (v1_templates.cc)
  asio::awaitable<void> RouteTemplates(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> BuildTemplate(HttpContext& ctx);
  asio::awaitable<void> RouteTemplateAliases(HttpContext& ctx, const std::vector<std::string>& seg);

  ApiConfig cfg_;
  SandboxManager* mgr_;
  ApiMetrics metrics_;
  RateLimiter limiter_;
  PortProxy ports_;  // exposed ports (port_proxy.h)
  e2b::E2bApi e2b_;  // the /e2b dialect (src/api/e2b)
  opensandbox::OpenSandboxApi osb_;  // the /opensandbox dialect (src/api/opensandbox)
};

}  // namespace hutch::api
