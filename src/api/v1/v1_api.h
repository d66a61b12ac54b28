// The native /v1 dialect (docs/api.md): its routes and handlers. Handlers
// only translate the wire format into SandboxManager / ExecSession / file
// operations; the router (src/http/router.h) has authenticated the request
// (Authorization: Bearer <key>) and charged its key's rate limit first.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "api/common/code_client.h"
#include "api/common/output_budget.h"
#include "api/common/port_proxy.h"
#include "api/common/tenant_scope.h"
#include "auth/credentials.h"
#include "auth/pty_tickets.h"
#include "common/blocking_worker.h"
#include "core/sandbox_manager.h"
#include "http/api_metrics.h"
#include "http/router.h"

namespace hutch::api {

struct V1Config {
  size_t json_body_limit = 1 << 20;
  // Per stream of a blocking exec's answer, after encoding.
  size_t exec_output_cap = 16 << 20;
  // What all blocking execs' answers may hold at once (0: no bound).
  size_t exec_buffer_budget = 64 << 20;
  std::chrono::seconds sse_ping_interval{15};
  // This node's name in a cluster (--node-name): sandbox objects say
  // "node": it. Empty: a single hutchd, no such field.
  std::string node;
  // Waits until the egress side follows a sandbox's vault as it now is
  // (its proxy armed or disarmed, its CA in its trust store), so a request
  // the sandbox makes after the answer is served as the vault says; its
  // error is the answer's. Unset: nothing to wait for.
  std::function<asio::awaitable<Status>(std::string)> vault_settled;
};

class V1Api {
 public:
  V1Api(V1Config cfg, SandboxManager* mgr, auth::Credentials* creds, ApiMetrics* metrics,
        PortProxy* ports)
      : cfg_(cfg),
        mgr_(mgr),
        creds_(creds),
        metrics_(*metrics),
        ports_(*ports),
        code_(mgr),
        exec_budget_(cfg.exec_buffer_budget) {}
  // Adds the /v1 mount (bearer key, rate limit) and every /v1 route.
  void Register(Router& r);
  // Bytes blocking exec answers hold now (hutch_exec_output_held_bytes).
  size_t exec_output_held() const { return exec_budget_.used(); }

 private:
  // A sandbox as the API shows it (its record, and the node it runs on).
  nlohmann::json SandboxOut(const SandboxRecord& r) const;
  // /v1 handlers (v1_*.cc)
  asio::awaitable<void> CreateSandbox(HttpContext& ctx);
  // The create's `vault` (none when absent), and the trust-store variables
  // it adds to `o`'s environment (v1_sandboxes.cc).
  Result<std::optional<vault::Vault>> CreateVault(const nlohmann::json& j, CreateOptions* o);
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
  // GET /events: a page of the sandbox's event log, or its follow stream
  // (v1_events.cc).
  asio::awaitable<void> SandboxEvents(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> FollowEvents(HttpContext& ctx, const std::string& id, EventFilter filter);
  asio::awaitable<void> GetNetwork(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> PutNetwork(HttpContext& ctx, const std::string& id);
  // /vault, /vault/{credentials|bindings}/{name} (v1_vault.cc): `kind` ""
  // for the whole vault.
  asio::awaitable<void> RouteVault(HttpContext& ctx, const std::string& id, std::string kind,
                                   std::string name);
  // A JSON object body whose parse error does not quote it (it may hold a
  // secret).
  asio::awaitable<Result<nlohmann::json>> ReadSecretJson(HttpContext& ctx);
  // cfg_.vault_settled, when set.
  asio::awaitable<Status> Settled(const std::string& id);
  asio::awaitable<void> Exec(HttpContext& ctx, const std::string& id, bool stream);
  // /code and /code/contexts[/{ctx}[/restart|interrupt]] (v1_code.cc); the
  // context and action by value: the route passes temporaries.
  asio::awaitable<void> RunCode(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> CodeContexts(HttpContext& ctx, const std::string& id,
                                     std::string context_id, std::string action);
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
  asio::awaitable<void> Processes(HttpContext& ctx, const std::string& id,
                                  const std::vector<std::string>& seg);
  asio::awaitable<void> ProcessStream(HttpContext& ctx, std::shared_ptr<Sandbox> sb, int pid);
  // /pty, a WebSocket (v1_pty.cc)
  asio::awaitable<void> Pty(HttpContext& ctx, const std::string& id);
  // POST /pty/ticket: a single-use ticket that opens /pty without the key.
  asio::awaitable<void> PtyTicket(HttpContext& ctx, const std::string& id);
  // Exposed ports (v1_ports.cc): /v1/sandboxes/{id}/ports/{port}/...,
  // relayed raw (the router skips its URL checks for the route).
  asio::awaitable<void> Ports(HttpContext& ctx, const std::string& id,
                              const std::vector<std::string>& seg);
  // The guard of the /v1 mount: bearer key, then its rate limit.
  asio::awaitable<bool> Admit(HttpContext& ctx);
  // The tenant check of what a routed request names (Mount::scope).
  asio::awaitable<bool> Scope(HttpContext& ctx);
  static ScopedTarget ScopedTargetOf(const HttpContext& ctx);
  // /v1/volumes[/{name}[/fs[/op]]] (v1_volumes.cc)
  asio::awaitable<void> RouteVolumes(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> CreateVolume(HttpContext& ctx);
  asio::awaitable<void> VolumeFileOp(HttpContext& ctx, const std::string& name,
                                     const std::string& op);
  asio::awaitable<void> VolumeFileGet(HttpContext& ctx, const std::string& name);
  asio::awaitable<void> VolumeFilePut(HttpContext& ctx, const std::string& name);
  nlohmann::json VolumeJson(const VolumeRecord& r);
  // /v1/templates[/{name}] and /v1/template-aliases[/{name}] (v1_templates.cc)
  asio::awaitable<void> RouteTemplates(HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> BuildTemplate(HttpContext& ctx);
  asio::awaitable<void> RouteTemplateAliases(HttpContext& ctx, const std::vector<std::string>& seg);

  V1Config cfg_;
  SandboxManager* mgr_;
  auth::Credentials* creds_;
  ApiMetrics& metrics_;
  PortProxy& ports_;  // shared with the E2B dialect's port forms
  CodeClient code_;
  // Blocking execs: the output their answers hold, and the thread that
  // encodes big answers off the I/O thread.
  OutputBudget exec_budget_;
  BlockingWorker exec_encoder_;
  // Terminal tickets: issued by PtyTicket, redeemed by Admit.
  auth::PtyTickets pty_tickets_;
};

}  // namespace hutch::api
