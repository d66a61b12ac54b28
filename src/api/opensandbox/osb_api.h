// The OpenSandbox dialect (docs/compat-opensandbox.md): OpenSandbox's
// lifecycle API under /opensandbox/v1 (OPEN-SANDBOX-API-KEY against
// hutch's keys) and, under /opensandbox/sandboxes/{id}/proxy/{port}/, the
// in-sandbox APIs its SDKs reach through the server proxy: execd (44772:
// commands, sessions, files, metrics) and the egress sidecar (18080: the
// sandbox's network policy and its credential vault). No OpenSandbox binary runs in the sandbox:
// every handler is a translation onto the core calls the /v1 handlers
// make (SandboxManager, background processes, FsCall, FileUpload /
// FileDownload). The only state kept here is which bash sessions are
// busy running a command and which sandboxes' egress policy is changing.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/common/code_client.h"
#include "api/common/tenant_scope.h"
#include "api/opensandbox/image_table.h"
#include "auth/credentials.h"
#include "core/sandbox_manager.h"
#include "http/router.h"

namespace hutch::api::opensandbox {

using Json = nlohmann::json;

// The path prefix the dialect lives under: the SDKs take
// OPEN_SANDBOX_DOMAIN=host:port/opensandbox and keep the path.
inline constexpr const char* kPrefix = "opensandbox";
// The in-sandbox ports the SDK asks endpoints for.
inline constexpr int kExecdPort = 44772;
inline constexpr int kEgressPort = 18080;
// The header that carries a sandbox's execd credential (handed out in the
// endpoint's `headers`, which every SDK forwards).
inline constexpr const char* kAccessTokenHeader = "X-EXECD-ACCESS-TOKEN";
// Who commands and file operations run as: execd runs as root in the
// OpenSandbox container images.
inline constexpr const char* kDefaultUser = "root";

class OpenSandboxApi {
 public:
  // `creds`: the keys and rate limits every dialect shares.
  OpenSandboxApi(SandboxManager* mgr, size_t json_body_limit, auth::Credentials* creds)
      : mgr_(mgr), json_limit_(json_body_limit), creds_(creds), code_(mgr) {}
  void SetImages(ImageTable t) { images_ = std::move(t); }
  // Waits until the egress proxy follows a sandbox's vault as it now is
  // (the /v1 routes' V1Config::vault_settled), so a vault answer is the
  // acknowledgement OpenSandbox's SDKs take it for.
  void SetVaultSettled(std::function<asio::awaitable<Status>(std::string)> f) {
    vault_settled_ = std::move(f);
  }
  // Adds the /opensandbox mounts and routes: the lifecycle API under
  // /opensandbox/v1 (OPEN-SANDBOX-API-KEY) and the server proxy.
  void Register(Router& r);

  // OpenSandbox's error answer: {"code":"HUTCH::<CODE>","message":...}.
  static asio::awaitable<void> SendError(HttpContext& ctx, const Error& e);
  // The code an error gets in that body ("HUTCH::SANDBOX_NOT_FOUND").
  static std::string ErrorCode(Code c);

 private:
  // osb_routes.cc: the guard of /opensandbox/v1 (key, rate limit).
  asio::awaitable<bool> Admit(HttpContext& ctx);
  // The tenant check of what a routed request names (Mount::scope).
  asio::awaitable<bool> Scope(HttpContext& ctx);
  // osb_proxy.cc: /opensandbox/sandboxes/{id}/proxy/{port}/...; the
  // sandbox's access token or a valid API key is required (AdmitProxy,
  // the mount's guard). An execd handler gets the running sandbox and the
  // path after the port.
  using ExecdHandler = std::function<asio::awaitable<void>(HttpContext&, std::shared_ptr<Sandbox>,
                                                           const std::vector<std::string>&)>;
  void RegisterProxy(Router& r);
  asio::awaitable<bool> AdmitProxy(HttpContext& ctx);
  asio::awaitable<void> ProxyEgress(HttpContext& ctx, const RouteMatch& m);
  asio::awaitable<void> ProxyExecd(HttpContext& ctx, const RouteMatch& m, const ExecdHandler& h);
  asio::awaitable<void> ProxyNoRoute(HttpContext& ctx, const RouteMatch& m);

  // osb_lifecycle.cc
  asio::awaitable<void> Create(HttpContext& ctx, const std::string& key_hash);
  asio::awaitable<void> List(HttpContext& ctx);
  asio::awaitable<void> Get(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Kill(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Renew(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> PauseResume(HttpContext& ctx, const std::string& id, bool pause);
  asio::awaitable<void> PatchMetadata(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Endpoint(HttpContext& ctx, const std::string& id, const std::string& port);
  asio::awaitable<void> RouteSnapshots(HttpContext& ctx, const std::vector<std::string>& s,
                                       const std::string& key_hash);
  Json SandboxJson(const SandboxRecord& r) const;

  // osb_command.cc: POST/DELETE /command, /command/status/{id}, /command/{id}/logs
  asio::awaitable<void> RunCommand(HttpContext& ctx, std::shared_ptr<Sandbox> sb);
  asio::awaitable<void> InterruptCommand(HttpContext& ctx, std::shared_ptr<Sandbox> sb);
  asio::awaitable<void> CommandStatus(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                      const std::string& cid);
  asio::awaitable<void> CommandLogs(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                    const std::string& cid);

  // osb_code.cc: POST/DELETE /code, /code/context, /code/contexts[/{id}]
  // (the path by value: the route hands a temporary)
  asio::awaitable<void> RunCode(HttpContext& ctx, std::shared_ptr<Sandbox> sb);
  asio::awaitable<void> InterruptCode(HttpContext& ctx, std::shared_ptr<Sandbox> sb);
  asio::awaitable<void> CodeContexts(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                     std::vector<std::string> s);

  // osb_session.cc: /session, /session/{sid}/run, DELETE /session/{sid}
  asio::awaitable<void> CreateSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb);
  asio::awaitable<void> RunInSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                     const std::string& sid);
  asio::awaitable<void> DeleteSession(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                      const std::string& sid);

  // osb_files.cc: /files..., /directories...
  asio::awaitable<void> Files(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                              const std::vector<std::string>& s);
  asio::awaitable<void> Upload(HttpContext& ctx, std::shared_ptr<Sandbox> sb);

  // osb_metrics.cc: /metrics, /metrics/watch
  asio::awaitable<void> Metrics(HttpContext& ctx, std::shared_ptr<Sandbox> sb, bool watch);

  // osb_egress.cc: the egress sidecar's /policy (and /credential-vault...)
  asio::awaitable<void> Egress(HttpContext& ctx, const SandboxRecord& rec,
                               const std::vector<std::string>& s);
  // osb_vault.cc: /credential-vault[/credentials|bindings[/{name}]] of the
  // sidecar and the lifecycle API; `s` is the path after credential-vault.
  asio::awaitable<void> CredentialVault(HttpContext& ctx, const std::string& id,
                                        const std::vector<std::string>& s);
  asio::awaitable<Status> Settled(const std::string& id);

  SandboxManager* mgr_;
  size_t json_limit_;
  auth::Credentials* creds_;
  ImageTable images_ = ImageTable::Defaults();
  CodeClient code_;  // the code-interpreter sandboxes' code server
  // "<sandbox>/<session>" of sessions running a command now: one command
  // at a time per bash.
  std::set<std::string> busy_sessions_;
  // Sandboxes whose egress policy a PATCH/DELETE /policy is changing now:
  // one change at a time per sandbox (osb_egress.cc).
  std::set<std::string> egress_changing_;
  std::function<asio::awaitable<Status>(std::string)> vault_settled_;
};

}  // namespace hutch::api::opensandbox
