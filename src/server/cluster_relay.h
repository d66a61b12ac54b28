// The HTTP side of a cluster node (issue 27): the router's forwarder,
// which relays a request about a sandbox another node holds to that node
// (streamed both ways through api/common/http_relay: unary, SSE, uploads,
// downloads, WebSocket upgrades), places creates (/v1, E2B, OpenSandbox)
// on a node chosen under an etcd txn (volumes pin, Idempotency-Keys are
// claimed cluster-wide, a missing template is copied first), serves
// volumes where they live, lists the cluster's sandboxes, and reports the
// sandboxes of a node that left as failed. GET /v1/nodes lists the nodes
// with totals; /metrics gets hutch_cluster_*.
//
// Nodes share one key set (and server secret): a relayed request keeps the
// client's own credentials and the owner node authenticates it as any
// request; a relay never adds authority. X-Hutch-Relayed names the node a
// request came through and stops it from being relayed again (a client
// sending it only gets this node's own answer).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <vector>

#include "auth/credentials.h"
#include "cluster/cluster.h"
#include "core/sandbox_manager.h"
#include "http/metrics.h"
#include "http/router.h"
#include "server/cluster_templates.h"

namespace hutch::api {

enum class CreateDialect { kV1, kE2b, kOpenSandbox };

class ClusterRelay {
 public:
  ClusterRelay(cluster::Cluster* cluster, SandboxManager* mgr, auth::Credentials* creds,
               Router* router);

  // The router's forwarder: true when the request was answered here.
  asio::awaitable<bool> Forward(HttpContext& ctx, const std::vector<std::string>& seg);
  // GET /v1/nodes (behind the /v1 guard).
  asio::awaitable<void> ListNodes(HttpContext& ctx);
  // The hutch_cluster_* gauges, from the node records (at scrape time).
  void UpdateMetrics();

 private:
  asio::awaitable<void> RelayTo(HttpContext& ctx, const std::string& node,
                                const std::string& advertise);
  // A create of any dialect (v1, E2B, OpenSandbox), placed on a node.
  asio::awaitable<bool> PlaceCreate(HttpContext& ctx, CreateDialect dialect);
  // /v1/volumes: a create checks the name cluster-wide and publishes it;
  // a volume another node lists is served there.
  asio::awaitable<bool> ServeVolume(HttpContext& ctx, const std::vector<std::string>& seg);
  // Whoever a request speaks for, by any dialect's API key header.
  auth::Principal Caller(const HttpContext& ctx) const;
  // The placed node lacks the template: it copies it from a node that has
  // it first (server/cluster_templates.h). The node's error answer if
  // that failed (an error: it did not answer).
  asio::awaitable<Result<std::optional<http::response<http::string_body>>>> CopyTemplate(
      HttpContext& ctx, const cluster::NodeInfo& node, const std::string& tpl);
  asio::awaitable<bool> ListCluster(HttpContext& ctx);
  // A request for a sandbox whose node left: a failed sandbox (GET) or a
  // sandbox_not_running error naming the node.
  asio::awaitable<bool> AnswerLost(HttpContext& ctx, const std::vector<std::string>& seg,
                                   const std::string& id, const cluster::SandboxHome& home);

  cluster::Cluster* cluster_;
  SandboxManager* mgr_;
  auth::Credentials* creds_;
  Router* router_;
  ClusterTemplates templates_;
  // Cluster totals on this node's /metrics (docs/cluster.md).
  Gauge& nodes_gauge_;
  Gauge& sandboxes_gauge_;
  Gauge& capacity_gauge_;
  Gauge& etcd_gauge_;
  Family<Counter>& lookups_;
  uint64_t lookups_cached_seen_ = 0, lookups_etcd_seen_ = 0;
};

}  // namespace hutch::api
