// The HTTP side of a cluster node (issue 27): the router's forwarder,
// which relays a request about a sandbox another node holds to that node
// (streamed both ways through api/common/http_relay: unary, SSE, uploads,
// downloads, WebSocket upgrades), places /v1 creates on a node chosen
// under an etcd txn, lists the cluster's sandboxes, and reports the
// sandboxes of a node that left as failed. GET /v1/nodes lists the nodes.
//
// Nodes share one key set (and server secret): a relayed request keeps the
// client's own credentials and the owner node authenticates it as any
// request; a relay never adds authority. X-Hutch-Relayed names the node a
// request came through and stops it from being relayed again (a client
// sending it only gets this node's own answer).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "auth/credentials.h"
#include "cluster/cluster.h"
#include "core/sandbox_manager.h"
#include "http/router.h"

namespace hutch::api {

class ClusterRelay {
 public:
  ClusterRelay(cluster::Cluster* cluster, SandboxManager* mgr, auth::Credentials* creds,
               Router* router)
      : cluster_(cluster), mgr_(mgr), creds_(creds), router_(router) {}

  // The router's forwarder: true when the request was answered here.
  asio::awaitable<bool> Forward(HttpContext& ctx, const std::vector<std::string>& seg);
  // GET /v1/nodes (behind the /v1 guard).
  asio::awaitable<void> ListNodes(HttpContext& ctx);

 private:
  asio::awaitable<void> RelayTo(HttpContext& ctx, const std::string& node,
                                const std::string& advertise);
  asio::awaitable<bool> PlaceCreate(HttpContext& ctx);
  asio::awaitable<bool> ListCluster(HttpContext& ctx);
  // A request for a sandbox whose node left: a failed sandbox (GET) or a
  // sandbox_not_running error naming the node.
  asio::awaitable<bool> AnswerLost(HttpContext& ctx, const std::vector<std::string>& seg,
                                   const std::string& id, const cluster::SandboxHome& home);

  cluster::Cluster* cluster_;
  SandboxManager* mgr_;
  auth::Credentials* creds_;
  Router* router_;
};

}  // namespace hutch::api
