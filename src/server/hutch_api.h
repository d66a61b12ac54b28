// The HTTP API of hutchd, wired: one router, the credentials every dialect
// shares, the port relay, and each dialect registered on the router — /v1
// (src/api/v1), /e2b (src/api/e2b), /opensandbox (src/api/opensandbox), /mcp
// (src/api/mcp) —
// plus the unauthenticated probes /healthz and /metrics and the web
// console's static assets under /ui/. The dialects know
// nothing of each other; this is the one place that knows them all.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/common/port_proxy.h"
#include "api/e2b/e2b_api.h"
#include "api/mcp/mcp_api.h"
#include "api/opensandbox/osb_api.h"
#include "api/v1/v1_api.h"
#include "auth/credentials.h"
#include "auth/rate_defaults.h"
#include "core/sandbox_manager.h"
#include "http/router.h"
#include "http/static_files.h"
#include "server/cluster_relay.h"

namespace hutch::api {

struct ApiConfig {
  // The accepted API keys (hashes, tenants, roles; keys themselves are not
  // kept) and the server secret per-sandbox tokens derive from.
  std::vector<auth::KeyEntry> api_keys;
  std::string server_secret;
  size_t json_body_limit = 1 << 20;
  size_t exec_output_cap = 16 << 20;
  size_t exec_buffer_budget = 64 << 20;
  std::chrono::seconds sse_ping_interval{15};
  // The vault's egress proxy, for /v1 (V1Config::vault_settled).
  std::function<asio::awaitable<Status>(std::string)> vault_settled;
  // Per-key token bucket, every dialect (0 = off): requests a second, bucket size.
  double rate_limit_rps = auth::kDefaultKeyRate;
  double rate_limit_burst = auth::kDefaultKeyBurst;
  // What this server can do, as /healthz reports it (driver, memory
  // snapshots, the CRIU probe's finding).
  nlohmann::json capabilities = nlohmann::json::object();
  // The domain sandboxes are reached under, {port}-{id}.{domain} (--domain):
  // E2B's create, connect and get answer it. Empty: not answered.
  std::string domain;
  // OpenSandbox image URI -> template (--opensandbox-images over the defaults).
  opensandbox::ImageTable opensandbox_images = opensandbox::ImageTable::Defaults();
  // The web console's assets (server/console_ui.h), loaded from ui_dir;
  // null when that directory holds no build of it.
  std::shared_ptr<const StaticFiles> console;
  std::string ui_dir;
  // This node's name in a cluster (--node-name; empty: no cluster).
  std::string node;
};

class HutchApi {
 public:
  // `mgr` may be null for a router that is only listed (--print-routes and
  // the docs test): registering calls nothing on it.
  HutchApi(ApiConfig cfg, SandboxManager* mgr);
  HutchApi(const HutchApi&) = delete;
  HutchApi& operator=(const HutchApi&) = delete;

  Router& router() { return router_; }
  // Replaces the accepted keys (SIGHUP reload).
  void SetKeys(std::vector<auth::KeyEntry> keys) { creds_.SetKeys(std::move(keys)); }
  // Makes this server a node of `cluster` (--cluster-etcd): requests for
  // other nodes' sandboxes are relayed, creates placed, lists merged.
  void EnableCluster(cluster::Cluster* cluster);

 private:
  void RegisterProbes();
  asio::awaitable<void> ServeMetrics(HttpContext& ctx);
  asio::awaitable<void> ListNodes(HttpContext& ctx);

  ApiConfig cfg_;
  SandboxManager* mgr_;
  auth::Credentials creds_;
  Router router_;
  PortProxy ports_;  // exposed ports: /v1's route and E2B's forms share its per-sandbox cap
  V1Api v1_;
  e2b::E2bApi e2b_;
  opensandbox::OpenSandboxApi osb_;
  mcp::McpApi mcp_;
  std::unique_ptr<ClusterRelay> cluster_;  // null: a single hutchd
};

}  // namespace hutch::api
