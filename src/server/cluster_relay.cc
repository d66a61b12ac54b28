#include "server/cluster_relay.h"

#include <spdlog/spdlog.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/common/http_relay.h"
#include "common/sha256.h"
#include "server/node_call.h"

namespace hutch::api {

namespace {

// The client's request header as the other node gets it: its own fields
// (credentials included), minus hop-by-hop ones and the framing.
http::request<http::string_body> CopyRequest(const HttpContext& ctx, std::string body) {
  http::request<http::string_body> req{ctx.method(), std::string(ctx.target()), 11};
  const auto hdr = ctx.RequestHeader();
  for (const auto& f : hdr.base()) {
    const auto name = f.name();
    if (name == http::field::connection || name == http::field::content_length ||
        name == http::field::transfer_encoding || name == http::field::expect ||
        name == http::field::keep_alive || name == http::field::te || name == http::field::upgrade)
      continue;
    req.insert(f.name_string(), f.value());
  }
  req.body() = std::move(body);
  return req;
}

// The answer of another node, passed on as this node's.
asio::awaitable<void> SendAnswer(HttpContext& ctx, http::response<http::string_body>& res) {
  std::string type;
  for (const auto& f : res.base()) {
    const auto name = f.name();
    if (name == http::field::content_type) {
      type = std::string(f.value());
      continue;
    }
    if (name == http::field::connection || name == http::field::content_length ||
        name == http::field::transfer_encoding || name == http::field::date ||
        name == http::field::server || beast::iequals(f.name_string(), "X-Request-Id"))
      continue;
    ctx.AddHeader(std::string(f.name_string()), std::string(f.value()));
  }
  // (Named before co_await: GCC 12 frees a ternary's temporary twice.)
  if (type.empty()) type = "application/json";
  std::string body = std::move(res.body());
  co_await ctx.SendText(res.result_int(), type, std::move(body));
}

// What the live nodes' records add up to.
struct Totals {
  int64_t used = 0, capacity = 0;
};
Totals Sum(const std::map<std::string, cluster::NodeInfo>& nodes) {
  Totals t;
  for (const auto& [name, n] : nodes) {
    t.used += n.record.value("used_sandboxes", int64_t{0});
    t.capacity += n.record.value("/capacity/sandboxes"_json_pointer, int64_t{0});
  }
  return t;
}

// The create routes placed cluster-wide, by dialect.
std::optional<CreateDialect> CreateRoute(const std::vector<std::string>& seg) {
  const auto is = [&](std::initializer_list<const char*> want) {
    return std::equal(seg.begin(), seg.end(), want.begin(), want.end());
  };
  if (is({"v1", "sandboxes"})) return CreateDialect::kV1;
  if (is({"e2b", "sandboxes"}) || is({"e2b", "v2", "sandboxes"})) return CreateDialect::kE2b;
  if (is({"opensandbox", "sandboxes"}) || is({"opensandbox", "v1", "sandboxes"}))
    return CreateDialect::kOpenSandbox;
  return std::nullopt;
}

}  // namespace

ClusterRelay::ClusterRelay(cluster::Cluster* cluster, SandboxManager* mgr, auth::Credentials* creds,
                           Router* router)
    : cluster_(cluster),
      mgr_(mgr),
      creds_(creds),
      router_(router),
      templates_(cluster, mgr->templates(), creds),
      nodes_gauge_(router->metrics().registry.AddGauge(
          "hutch_cluster_nodes", "Live nodes of the cluster (records in etcd)")),
      sandboxes_gauge_(router->metrics().registry.AddGauge(
          "hutch_cluster_sandboxes", "Sandboxes on all live nodes, from their records")),
      capacity_gauge_(router->metrics().registry.AddGauge("hutch_cluster_capacity_sandboxes",
                                                          "Sandbox capacity of all live nodes")),
      etcd_gauge_(router->metrics().registry.AddGauge(
          "hutch_cluster_etcd_reachable", "1 if this node's last call to etcd succeeded")),
      lookups_(router->metrics().registry.AddCounterFamily(
          "hutch_cluster_owner_lookups_total",
          "Lookups of the node holding a sandbox, by where the answer came from", {"source"})) {}

void ClusterRelay::UpdateMetrics() {
  const Totals t = Sum(cluster_->nodes());
  nodes_gauge_.Set(static_cast<double>(cluster_->nodes().size()));
  sandboxes_gauge_.Set(static_cast<double>(t.used));
  capacity_gauge_.Set(static_cast<double>(t.capacity));
  etcd_gauge_.Set(cluster_->etcd_reachable() ? 1 : 0);
  lookups_.With({"cache"}).Inc(cluster_->lookups_cached() - lookups_cached_seen_);
  lookups_.With({"etcd"}).Inc(cluster_->lookups_etcd() - lookups_etcd_seen_);
  lookups_cached_seen_ = cluster_->lookups_cached();
  lookups_etcd_seen_ = cluster_->lookups_etcd();
}

auth::Principal ClusterRelay::Caller(const HttpContext& ctx) const {
  return creds_->MatchAnyKey({auth::BearerToken(ctx.Header("Authorization")),
                              std::string(ctx.Header("X-API-Key")),
                              std::string(ctx.Header("OPEN-SANDBOX-API-KEY"))});
}

asio::awaitable<void> ClusterRelay::RelayTo(HttpContext& ctx, const std::string& node,
                                            const std::string& advertise) {
  auto up = co_await DialNode(node, advertise);
  if (!up.ok()) co_return co_await ctx.SendError(up.error());
  RelaySpec spec;
  spec.target = std::string(ctx.target());
  spec.set_headers = {{kRelayedHeader, cluster_->node()}};
  spec.upstream_name = "node " + node;
  spec.unreachable_code = Code::kUnavailable;
  // A long stream (SSE, a terminal) ends when its node leaves the cluster.
  cluster::Cluster* c = cluster_;
  spec.gone = [c, node] { return c->nodes().count(node) == 0; };
  co_await RelayHttp(ctx, std::move(up).value(), spec);
}

asio::awaitable<bool> ClusterRelay::Forward(HttpContext& ctx, const std::vector<std::string>& seg) {
  if (co_await templates_.Serve(ctx, seg)) co_return true;
  if (!ctx.Header(kRelayedHeader).empty()) co_return false;
  if (const auto dialect = CreateRoute(seg); dialect && ctx.method() == http::verb::post)
    co_return co_await PlaceCreate(ctx, *dialect);
  if (co_await ServeVolume(ctx, seg)) co_return true;
  if (seg.size() == 2 && seg[0] == "v1" && seg[1] == "sandboxes") {
    if (ctx.method() == http::verb::get && !ctx.Query("watch")) co_return co_await ListCluster(ctx);
    co_return false;
  }
  const auto id = router_->SandboxOf(ctx, seg);
  if (!id || id->empty() || mgr_->Get(*id).ok()) co_return false;
  auto home = co_await cluster_->Lookup(*id);
  if (!home.ok()) {
    // etcd out of reach: this node still serves its own sandboxes; a
    // sandbox it does not hold cannot be found now (retry).
    spdlog::warn("cluster_lookup_failed sandbox={} err=\"{}\"", *id, home.error().message);
    const Error e = MakeError(Code::kUnavailable, "sandbox " + *id +
                                                      " is not on this node and the cluster's "
                                                      "etcd does not answer: " +
                                                      home.error().message);
    co_await ctx.SendError(e);
    co_return true;
  }
  if (!*home || (*home)->node == cluster_->node()) co_return false;
  if (!(*home)->node_alive) co_return co_await AnswerLost(ctx, seg, *id, **home);
  co_await RelayTo(ctx, (*home)->node, (*home)->advertise);
  // The cached owner may be stale: the sandbox was deleted (404, or this
  // was its DELETE) or its node is not reachable.
  const int status = ctx.status_sent();
  if (status == 404 || status == 409 || status >= 500 ||
      (seg.size() == 3 && ctx.method() == http::verb::delete_))
    cluster_->Forget(*id);
  co_return true;
}

asio::awaitable<bool> ClusterRelay::AnswerLost(HttpContext& ctx,
                                               const std::vector<std::string>& seg,
                                               const std::string& id,
                                               const cluster::SandboxHome& home) {
  // Only /v1 answers here, and only to its owner (or an admin): anyone
  // else gets what an unknown id gets.
  if (seg.empty() || seg[0] != "v1") co_return false;
  const auth::Principal who = creds_->MatchBearer(ctx.Header("Authorization"));
  if (who.empty() || !who.Owns(home.owner)) co_return false;
  const std::string reason =
      "node " + home.node + " left the cluster (its etcd lease expired); the sandbox is lost";
  if (seg.size() == 3 && ctx.method() == http::verb::get) {
    const nlohmann::json j = {
        {"id", id}, {"status", "failed"}, {"reason", reason}, {"node", home.node}};
    co_await ctx.SendJson(200, j);
    co_return true;
  }
  if (seg.size() == 3 && ctx.method() == http::verb::delete_) {
    // Nothing is left to delete: the node drops it when it comes back.
    co_await ctx.SendEmpty(204);
    co_return true;
  }
  const Error e = MakeError(Code::kSandboxNotRunning, "sandbox " + id + ": " + reason);
  co_await ctx.SendError(e);
  co_return true;
}

asio::awaitable<bool> ClusterRelay::PlaceCreate(HttpContext& ctx, CreateDialect dialect) {
  // Unauthenticated: the dialect's guard answers (the body stays unread).
  const auth::Principal who = Caller(ctx);
  if (who.empty()) co_return false;
  auto body = co_await ctx.ReadJson(1 << 20);
  if (!body.ok()) {
    co_await ctx.SendError(body.error());
    co_return true;
  }
  std::string affinity, tpl;
  std::vector<std::string> volumes;
  if (body->is_object() && dialect == CreateDialect::kV1) {
    if (auto it = body->find("node"); it != body->end()) {
      if (!it->is_string()) {
        const Error e = MakeError(Code::kInvalidRequest, "'node' must be a string");
        co_await ctx.SendError(e);
        co_return true;
      }
      affinity = it->get<std::string>();
      body->erase(it);
    }
    if (auto it = body->find("template"); it != body->end() && it->is_string())
      tpl = it->get<std::string>();
    if (auto it = body->find("volumes"); it != body->end() && it->is_array())
      for (const auto& v : *it)
        if (v.is_object() && v.contains("name") && v["name"].is_string())
          volumes.push_back(v["name"].get<std::string>());
  } else if (body->is_object() && dialect == CreateDialect::kE2b) {
    if (auto it = body->find("templateID"); it != body->end() && it->is_string())
      tpl = it->get<std::string>();
  }
  // The other dialects' template names (E2B aliases, OpenSandbox images)
  // resolve on the node: a name no node lists places by capacity alone.
  if (dialect != CreateDialect::kV1 && !templates_.Listed(tpl)) tpl.clear();
  // A volume lives on one node: a sandbox mounting it is made there.
  if (!volumes.empty()) co_await cluster_->RefreshNow();
  for (const auto& v : volumes) {
    std::string holder;
    for (const auto& [name, n] : cluster_->nodes())
      if (n.has_volume(v)) holder = name;
    if (holder.empty()) continue;  // the node placed answers volume_not_found
    if (!affinity.empty() && affinity != holder) {
      const Error e = MakeError(Code::kConflict, "volume '" + v + "' lives on node '" + holder +
                                                     "': a sandbox mounting it is made there, "
                                                     "not on '" +
                                                     affinity + "'");
      co_await ctx.SendError(e);
      co_return true;
    }
    affinity = holder;
  }
  auto place = co_await cluster_->Place(tpl, affinity);
  if (!place.ok()) {
    co_await ctx.SendError(place.error());
    co_return true;
  }
  cluster::NodeInfo target = place->node;
  // A retried create (same Idempotency-Key) goes where the first went,
  // whichever node it comes through; that node's own cache replays it.
  if (const std::string idem(ctx.Header("Idempotency-Key")); !idem.empty()) {
    auto held =
        co_await cluster_->ClaimIdempotency(Sha256Hex(who.owner + "\n" + idem), target.name);
    auto node = held.ok() ? cluster_->nodes().find(*held) : cluster_->nodes().end();
    if (!held.ok() || node == cluster_->nodes().end()) {
      co_await cluster_->Release(place->reservation);
      const Error e =
          held.ok() ? MakeError(Code::kUnavailable, "node " + *held + " left") : held.error();
      co_await ctx.SendError(e);
      co_return true;
    }
    target = node->second;
  }
  auto copied = co_await CopyTemplate(ctx, target, tpl);
  if (!copied.ok() || *copied) {
    // The node could not get the template: its answer (or why not).
    co_await cluster_->Release(place->reservation);
    if (!copied.ok()) co_await ctx.SendError(copied.error());
    else co_await SendAnswer(ctx, **copied);
    co_return true;
  }
  // Even a create placed here goes through the node's own front door once
  // more (marked relayed): the body is read already, and the route then
  // treats it as any create.
  auto req = CopyRequest(ctx, body->dump());
  req.set(kRelayedHeader, cluster_->node());
  auto res = co_await CallNode(target.name, target.advertise, std::move(req));
  co_await cluster_->Release(place->reservation);
  if (!res.ok()) {
    co_await ctx.SendError(res.error());
    co_return true;
  }
  co_await SendAnswer(ctx, *res);
  co_return true;
}

asio::awaitable<bool> ClusterRelay::ServeVolume(HttpContext& ctx,
                                                const std::vector<std::string>& seg) {
  if (seg.size() < 2 || seg[0] != "v1" || seg[1] != "volumes") co_return false;
  auto holder = [&](const std::string& v) -> const cluster::NodeInfo* {
    for (const auto& [name, n] : cluster_->nodes())
      if (name != cluster_->node() && n.has_volume(v)) return &n;
    return nullptr;
  };
  if (seg.size() == 2 && ctx.method() == http::verb::post) {
    if (creds_->MatchBearer(ctx.Header("Authorization")).empty()) co_return false;
    auto body = co_await ctx.ReadJson(1 << 20);
    if (!body.ok()) {
      co_await ctx.SendError(body.error());
      co_return true;
    }
    // One name, one volume, cluster-wide: creates place by it.
    std::string name;
    if (body->is_object() && body->contains("name") && (*body)["name"].is_string())
      name = (*body)["name"].get<std::string>();
    co_await cluster_->RefreshNow();
    if (const cluster::NodeInfo* n = holder(name)) {
      const Error e = MakeError(Code::kConflict,
                                "volume '" + name + "' already exists (on node " + n->name + ")");
      co_await ctx.SendError(e);
      co_return true;
    }
    auto req = CopyRequest(ctx, body->dump());
    req.set(kRelayedHeader, cluster_->node());
    auto res = co_await CallNode(cluster_->node(), cluster_->advertise(), std::move(req));
    if (!res.ok()) {
      co_await ctx.SendError(res.error());
      co_return true;
    }
    // Listed in this node's record before the answer: a create mounting
    // it, through any node, is placed here.
    if (res->result_int() < 300) co_await cluster_->PublishNow();
    co_await SendAnswer(ctx, *res);
    co_return true;
  }
  if (seg.size() < 3 || (mgr_->volumes() && mgr_->volumes()->Get(seg[2]).ok())) co_return false;
  const cluster::NodeInfo* n = holder(seg[2]);
  if (!n) co_return false;
  const cluster::NodeInfo node = *n;
  co_await RelayTo(ctx, node.name, node.advertise);
  co_return true;
}

asio::awaitable<Result<std::optional<http::response<http::string_body>>>>
ClusterRelay::CopyTemplate(HttpContext& ctx, const cluster::NodeInfo& node,
                           const std::string& tpl) {
  const std::string from = templates_.SourceFor(tpl, node.name);
  if (from.empty()) co_return std::optional<http::response<http::string_body>>();
  http::request<http::string_body> req{http::verb::post,
                                       "/v1/cluster/templates/" + tpl + "/fetch?from=" + from, 11};
  req.set(http::field::authorization, std::string(ctx.Header("Authorization")));
  req.set(kRelayedHeader, cluster_->node());
  auto res = co_await CallNode(node.name, node.advertise, std::move(req));
  if (!res.ok()) co_return res.error();
  using Answer = std::optional<http::response<http::string_body>>;
  if (res->result_int() >= 300) co_return Answer(std::move(*res));
  co_return Answer();
}

asio::awaitable<bool> ClusterRelay::ListCluster(HttpContext& ctx) {
  const auth::Principal who = creds_->MatchBearer(ctx.Header("Authorization"));
  if (who.empty()) co_return false;
  nlohmann::json items = nlohmann::json::array();
  nlohmann::json unreachable = nlohmann::json::array();
  // (Copied: the map may be refreshed while a call is out.)
  const auto nodes = cluster_->nodes();
  // Not joined (etcd out of reach since the start): this node's own list.
  if (!nodes.count(cluster_->node())) co_return false;
  for (const auto& [name, n] : nodes) {
    auto req = CopyRequest(ctx, "");
    req.set(kRelayedHeader, cluster_->node());
    auto res = co_await CallNode(name, n.advertise, std::move(req));
    if (!res.ok()) {
      unreachable.push_back(name);
      continue;
    }
    if (res->result_int() != 200) {
      // The same request every node judges alike (a bad query): its answer.
      co_await SendAnswer(ctx, *res);
      co_return true;
    }
    auto j = nlohmann::json::parse(res->body(), nullptr, false);
    if (!j.is_object() || !j.contains("items") || !j["items"].is_array()) continue;
    for (auto& item : j["items"]) items.push_back(std::move(item));
  }
  auto lost = co_await cluster_->Orphans();
  if (lost.ok()) {
    const auto status = ctx.Query("status");
    for (const auto& [id, home] : *lost) {
      if (!who.Owns(home.owner) || (status && *status != "failed")) continue;
      items.push_back({{"id", id},
                       {"status", "failed"},
                       {"node", home.node},
                       {"reason", "node " + home.node +
                                      " left the cluster (its etcd lease expired); the sandbox "
                                      "is lost"}});
    }
  }
  nlohmann::json out = {{"items", items}, {"next_cursor", nullptr}};
  if (!unreachable.empty()) out["unreachable_nodes"] = unreachable;
  co_await ctx.SendJson(200, out);
  co_return true;
}

asio::awaitable<void> ClusterRelay::ListNodes(HttpContext& ctx) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [name, n] : cluster_->nodes()) items.push_back(n.record);
  const Totals t = Sum(cluster_->nodes());
  const nlohmann::json totals = {
      {"nodes", items.size()}, {"sandboxes", t.used}, {"capacity_sandboxes", t.capacity}};
  const nlohmann::json out = {{"node", cluster_->node()},
                              {"etcd_reachable", cluster_->etcd_reachable()},
                              {"totals", totals},
                              {"items", items}};
  co_await ctx.SendJson(200, out);
}

}  // namespace hutch::api
