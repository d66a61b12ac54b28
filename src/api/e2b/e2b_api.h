// The E2B dialect (docs/compat-e2b.md): the control plane under /e2b
// (REST, X-API-Key) and envd, the in-sandbox API the SDK reaches through
// the same prefix with E2b-Sandbox-Id / E2b-Sandbox-Port headers or by a
// Host of 49983-{id}.<domain> (Connect RPC with the JSON or the binary
// protobuf codec, plus /files and /health). Every handler is a
// translation onto the same core calls the /v1 handlers make; the only
// state kept here is what E2B's protocol needs and core does not have:
// the terminals whose input arrives on other requests, and directory
// watchers.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/common/port_proxy.h"
#include "api/common/tenant_scope.h"
#include "api/e2b/connect_codec.h"
#include "api/e2b/dir_watch.h"
#include "api/e2b/e2b_templates.h"
#include "api/e2b/proto_json.h"
#include "auth/credentials.h"
#include "core/pty_session.h"
#include "core/sandbox_manager.h"
#include "core/vault.h"
#include "http/router.h"

namespace hutch::api::e2b {

// The envd version hutch reports: the SDK gates features on it, so it
// names the newest envd whose features used by the SDK all work here
// (0.5.7: per-request default user, stdin flag, CloseStdin, octet-stream
// uploads). 0.6.x adds file metadata and watch entries, which hutch lacks.
inline constexpr const char* kEnvdVersion = "0.5.7";
// The user envd runs as when a request names none.
inline constexpr const char* kDefaultUser = "user";

// One decoded envd RPC.
struct EnvdCall {
  std::shared_ptr<Sandbox> sb;
  std::string user;
  Json request;
  std::optional<std::chrono::milliseconds> timeout;  // Connect-Timeout-Ms
  std::chrono::seconds keepalive{0};                 // Keepalive-Ping-Interval; 0: none
  ConnectCodec codec;                                // the request's, also the answer's
};

// The port envd listens on in an E2B sandbox: a Host of 49983-{id}.<domain>
// names envd itself.
inline constexpr const char* kEnvdPort = "49983";

// A sandbox E2B can see: stopped and failed ones are gone (404), as in E2B.
Result<SandboxRecord> Visible(SandboxManager* mgr, const std::string& id);
// `timeout` (seconds) of a request body; nullopt when absent.
Result<std::optional<int64_t>> TimeoutField(const Json& body);
// A hutch snapshot's id (snap_...): E2B names snapshots where it names
// templates (create's templateID, DELETE /templates/{id}).
inline bool IsSnapshotId(const std::string& s) { return s.rfind("snap_", 0) == 0; }

class E2bApi {
 public:
  // `creds`: the keys and rate limits every dialect shares; `ports`: the
  // relay of exposed ports, shared with /v1's ports route.
  // `domain`: what create, connect and get answer as `domain` (SDKs then
  // reach envd and ports at {port}-{id}.{domain}); empty: no `domain`.
  E2bApi(SandboxManager* mgr, size_t json_body_limit, auth::Credentials* creds, PortProxy* ports,
         std::string domain = {})
      : mgr_(mgr),
        json_limit_(json_body_limit),
        creds_(creds),
        ports_(ports),
        domain_(std::move(domain)),
        templates_(mgr, json_body_limit) {}
  // Adds the /e2b mount (X-API-Key), the control plane's routes, and the
  // matchers of envd (E2b-Sandbox-Id, or a Host naming port 49983) and of
  // exposed ports (a Host naming another sandbox port, E2b-Sandbox-Port).
  void Register(Router& r);

  // The control plane's error answer: {"code":<status>,"message":...}.
  static asio::awaitable<void> SendControlError(HttpContext& ctx, const Error& e);

  // Waits until the egress proxy follows a sandbox's vault (network.rules:
  // e2b_vault.h), as /v1's V1Config::vault_settled.
  void SetVaultSettled(std::function<asio::awaitable<Status>(std::string)> f) {
    vault_settled_ = std::move(f);
  }

 private:
  // Stores `v` as the sandbox's vault and waits for the egress proxy.
  asio::awaitable<Status> PutRulesVault(const std::string& id, vault::Vault v);
  // e2b_routes.cc: the guard of the control plane (X-API-Key, rate limit).
  asio::awaitable<bool> Admit(HttpContext& ctx);
  // The tenant check of the sandbox a routed request names (Mount::scope).
  asio::awaitable<bool> Scope(HttpContext& ctx);
  // envd (e2b_envd.cc): a call to sandbox `id` (E2b-Sandbox-Id, or the
  // Host), `seg` its path's segments after /e2b or from the root.
  asio::awaitable<void> HandleEnvd(HttpContext& ctx, const std::string& id,
                                   const std::vector<std::string>& seg);

  // e2b_ports.cc: exposed ports by Host ({port}-{id}.<domain>) or by
  // E2b-Sandbox-Port under /e2b; relayed raw.
  static bool IsPortRequest(const HttpContext& ctx, const std::vector<std::string>& seg);
  asio::awaitable<void> PortsByHost(HttpContext& ctx, const std::string& id,
                                    const std::string& port_text);
  asio::awaitable<void> PortsByE2bHeader(HttpContext& ctx);
  asio::awaitable<void> PortsE2b(HttpContext& ctx, const std::string& id,
                                 const std::string& port_text, std::string target,
                                 std::string prefix);

  // e2b_control.cc; `key_hash` (Create) owns what it creates.
  asio::awaitable<void> Create(HttpContext& ctx, const std::string& key_hash);
  asio::awaitable<void> List(HttpContext& ctx, bool v2);
  asio::awaitable<void> Get(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Kill(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> SetTimeout(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Pause(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> Connect(HttpContext& ctx, const std::string& id, bool legacy_resume);
  asio::awaitable<void> Metrics(HttpContext& ctx, const std::string& id);
  // /sandboxes/{id}/logs and /v2/sandboxes/{id}/logs (e2b_logs.cc).
  asio::awaitable<void> Logs(HttpContext& ctx, const std::string& id, bool v2);
  // POST /sandboxes/{id}/refreshes: keep alive `duration` seconds more.
  asio::awaitable<void> Refresh(HttpContext& ctx, const std::string& id);
  // e2b_network.cc: PUT /sandboxes/{id}/network.
  asio::awaitable<void> UpdateNetwork(HttpContext& ctx, const std::string& id);
  // e2b_snapshots.cc: snapshots taken, listed, deleted.
  asio::awaitable<void> CreateSnapshot(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> ListSnapshots(HttpContext& ctx);
  asio::awaitable<void> DeleteTemplate(HttpContext& ctx, const std::string& id);
  // e2b_volumes.cc: volumes by id (a hutch volume's name).
  asio::awaitable<void> CreateVolume(HttpContext& ctx);
  asio::awaitable<void> ListVolumes(HttpContext& ctx);
  asio::awaitable<void> GetVolume(HttpContext& ctx, const std::string& id);
  asio::awaitable<void> DeleteVolume(HttpContext& ctx, const std::string& id);
  Result<VolumeRecord> OwnVolume(const HttpContext& ctx, const std::string& id) const;
  // e2b_fork.cc: POST /sandboxes/{id}/fork.
  asio::awaitable<void> Fork(HttpContext& ctx, const std::string& id);
  Json SandboxJson(const SandboxRecord& r, bool detail) const;

  // e2b_process.cc: process.Process
  asio::awaitable<void> ProcessStart(HttpContext& ctx, EnvdCall& call);
  asio::awaitable<void> ProcessConnect(HttpContext& ctx, EnvdCall& call);
  asio::awaitable<Result<Json>> ProcessUnary(const std::string& method, EnvdCall& call);
  asio::awaitable<void> PtyStart(HttpContext& ctx, EnvdCall& call, std::vector<std::string> argv,
                                 std::map<std::string, std::string> env, std::string cwd,
                                 const Json& pty);

  // e2b_filesystem.cc: filesystem.Filesystem
  asio::awaitable<Result<Json>> FilesystemUnary(const std::string& method, EnvdCall& call);
  asio::awaitable<void> WatchDir(HttpContext& ctx, EnvdCall& call);

  // e2b_files.cc: GET/POST /files
  asio::awaitable<void> FilesGet(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                 const std::string& user);
  asio::awaitable<void> FilesPost(HttpContext& ctx, std::shared_ptr<Sandbox> sb,
                                  const std::string& user);

  static std::string PtyKey(const std::string& id, int pid) {
    return id + "/" + std::to_string(pid);
  }

  SandboxManager* mgr_;
  size_t json_limit_;
  auth::Credentials* creds_;
  PortProxy* ports_;
  std::string domain_;
  // Terminals started by process.Process/Start, by "<sandbox>/<pid>": their
  // keystrokes (SendInput) and sizes (Update) come on other requests. The
  // session is owned by the Start stream's coroutine, which removes it
  // here when it ends; a call holds it (lock()) while it awaits.
  std::map<std::string, std::weak_ptr<PtySession>> ptys_;
  // Watchers of CreateWatcher, by id.
  std::map<std::string, std::unique_ptr<DirWatcher>> watchers_;
  std::function<asio::awaitable<Status>(std::string)> vault_settled_;
  // The template build API (e2b_templates.h).
  E2bTemplates templates_;
};

}  // namespace hutch::api::e2b
