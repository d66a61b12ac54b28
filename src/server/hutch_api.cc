#include "server/hutch_api.h"

#include "server/console_ui.h"

namespace hutch::api {

HutchApi::HutchApi(ApiConfig cfg, SandboxManager* mgr)
    : cfg_(std::move(cfg)),
      mgr_(mgr),
      creds_(cfg_.api_keys, cfg_.server_secret, cfg_.rate_limit_rps, cfg_.rate_limit_burst),
      ports_(mgr),
      v1_(V1Config{cfg_.json_body_limit, cfg_.exec_output_cap, cfg_.exec_buffer_budget,
                   cfg_.sse_ping_interval, cfg_.node, cfg_.vault_settled},
          mgr, &creds_, &router_.metrics(), &ports_),
      e2b_(mgr, cfg_.json_body_limit, &creds_, &ports_, cfg_.domain),
      osb_(mgr, cfg_.json_body_limit, &creds_),
      mcp_(mcp::McpConfig{12 << 20, cfg_.sse_ping_interval}, mgr, &creds_) {
  osb_.SetImages(cfg_.opensandbox_images);
  osb_.SetVaultSettled(cfg_.vault_settled);
  e2b_.SetVaultSettled(cfg_.vault_settled);
  RegisterProbes();
  RegisterConsole(router_, cfg_.console, cfg_.ui_dir);
  // E2B first: its Host form owns every path, so its matcher and its
  // access-log label come before everyone's.
  e2b_.Register(router_);
  v1_.Register(router_);
  osb_.Register(router_);
  mcp_.Register(router_);
}

void HutchApi::RegisterProbes() {
  using V = http::verb;
  auto health = [this](HttpContext& ctx, const RouteMatch&) -> asio::awaitable<void> {
    const nlohmann::json health = {{"status", "ok"},
                                   {"sandboxes_running", mgr_->running_count()},
                                   {"capabilities", cfg_.capabilities}};
    co_await ctx.SendJson(200, health);
  };
  router_.Add(V::get, "/healthz", health);
  router_.Add(V::head, "/healthz", health);
  // The cluster's nodes (a single hutchd answers not_supported).
  router_.Add(V::get, "/v1/nodes",
              [this](HttpContext& ctx, const RouteMatch&) { return ListNodes(ctx); });
  router_.Add(V::get, "/metrics",
              [this](HttpContext& ctx, const RouteMatch&) { return ServeMetrics(ctx); });
}

void HutchApi::EnableCluster(cluster::Cluster* cluster) {
  cluster_ = std::make_unique<ClusterRelay>(cluster, mgr_, &creds_, &router_);
  router_.SetForwarder([this](HttpContext& ctx, const std::vector<std::string>& seg) {
    return cluster_->Forward(ctx, seg);
  });
}

asio::awaitable<void> HutchApi::ListNodes(HttpContext& ctx) {
  if (!cluster_) {
    const Error e = MakeError(Code::kNotSupported,
                              "this hutchd is not a cluster node (start it with --cluster-etcd)");
    co_return co_await ctx.SendError(e);
  }
  co_await cluster_->ListNodes(ctx);
}

asio::awaitable<void> HutchApi::ServeMetrics(HttpContext& ctx) {
  // Values owned elsewhere are read at scrape time, so they cannot drift.
  ApiMetrics& metrics = router_.metrics();
  auto by_status = mgr_->CountByStatus();
  for (auto st : {SandboxStatus::kStarting, SandboxStatus::kRunning, SandboxStatus::kPaused,
                  SandboxStatus::kStopped, SandboxStatus::kFailed})
    metrics.sandboxes.With({StatusName(st)}).Set(static_cast<double>(by_status[st]));
  metrics.sandboxes_running.Set(static_cast<double>(mgr_->running_count()));
  metrics.sandboxes_warm.Set(static_cast<double>(mgr_->warm_count()));
  if (const auto* net = mgr_->network()) {
    metrics.network_slots.With({"warm"}).Set(static_cast<double>(net->warm()));
    metrics.network_slots.With({"leased"}).Set(static_cast<double>(net->in_use()));
  }
  DriverPools pools;
  for (const auto& [name, driver] : mgr_->drivers()) {
    const DriverPools p = driver->Pools();
    pools.disks_ready += p.disks_ready;
    pools.disks_wanted += p.disks_wanted;
  }
  metrics.disk_pool_ready.Set(static_cast<double>(pools.disks_ready));
  metrics.disk_pool_target.Set(static_cast<double>(pools.disks_wanted));
  if (const auto* images = mgr_->image_puller()) {
    metrics.image_pulls.Set(static_cast<double>(images->pulls()));
    metrics.image_cache_hits.Set(static_cast<double>(images->cache_hits()));
    metrics.image_layers_reused.Set(static_cast<double>(images->layers_reused()));
  }
  metrics.rate_limit_buckets.Set(static_cast<double>(creds_.rate_limit_buckets()));
  metrics.exec_output_held.Set(static_cast<double>(v1_.exec_output_held()));
  if (cluster_) cluster_->UpdateMetrics();
  auto up = std::chrono::steady_clock::now() - metrics.started;
  metrics.uptime_seconds.Set(std::chrono::duration<double>(up).count());
  co_await ctx.SendText(200, "text/plain; version=0.0.4; charset=utf-8", metrics.registry.Render());
}

}  // namespace hutch::api
