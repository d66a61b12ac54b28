#include "cluster/cluster.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <set>

#include "common/clock.h"

namespace hutch::cluster {

namespace {

const std::string kNodes = "/hutch/nodes/";
const std::string kSandboxes = "/hutch/sandboxes/";
const std::string kNodeSandboxes = "/hutch/node-sandboxes/";
const std::string kPlacement = "/hutch/placement/";
const std::string kReservations = "/hutch/reservations/";
const std::string kIdempotency = "/hutch/idempotency/";
// Idempotency keys are kept a day on each node (core/idempotency.h); the
// cluster's record of one lives between that and an hour longer.
constexpr int64_t kIdempotencyLeaseS = 25 * 3600;
constexpr auto kIdempotencyLeaseRenew = std::chrono::hours(1);
// Owner lookups kept (about 100 bytes each).
constexpr size_t kOwnerCacheMax = 100000;

bool Lists(const nlohmann::json& record, const char* field, const std::string& name) {
  auto it = record.find(field);
  if (it == record.end() || !it->is_array()) return false;
  for (const auto& t : *it)
    if (t.is_string() && t.get<std::string>() == name) return true;
  return false;
}

std::string Tail(const std::string& key, const std::string& prefix) {
  return key.substr(prefix.size());
}

// The default template, when a create names none.
const char* const kBaseTemplate = "base";

}  // namespace

int64_t NodeInfo::free_slots() const {
  const auto cap = record.value("/capacity/sandboxes"_json_pointer, int64_t{0});
  const auto used = record.value("used_sandboxes", int64_t{0});
  return cap - used;
}

bool NodeInfo::has_template(const std::string& name) const {
  return Lists(record, "templates", name.empty() ? kBaseTemplate : name);
}

bool NodeInfo::has_volume(const std::string& name) const { return Lists(record, "volumes", name); }

Cluster::Cluster(asio::any_io_executor ex, ClusterOptions opts, Describe describe, LocalIds local,
                 DropLocal drop)
    : ex_(ex),
      opts_(std::move(opts)),
      describe_(std::move(describe)),
      local_(std::move(local)),
      drop_(std::move(drop)),
      etcd_(ex, opts_.etcd, opts_.etcd_tls) {}

void Cluster::Note(const Status& st, const char* what) {
  if (st.ok()) {
    if (!etcd_ok_) spdlog::info("cluster_etcd reachable node={}", opts_.node);
    etcd_ok_ = true;
    return;
  }
  if (etcd_ok_ || st.error().code != Code::kUnavailable)
    spdlog::warn("cluster_{}_failed node={} err=\"{}\" (retrying)", what, opts_.node,
                 st.error().message);
  if (st.error().code == Code::kUnavailable) etcd_ok_ = false;
}

std::string Cluster::RecordValue(const std::string& owner) const {
  return nlohmann::json{{"node", opts_.node}, {"owner", owner}}.dump();
}

asio::awaitable<void> Cluster::Start() {
  Status st = co_await Join();
  Note(st, "join");
  if (st.ok()) {
    Note(co_await RefreshNodes(), "nodes");
    Note(co_await Reconcile(), "reconcile");
  }
  asio::co_spawn(ex_, Run(), asio::detached);
}

asio::awaitable<void> Cluster::Run() {
  asio::steady_timer t(ex_);
  // A keepalive a third of the lease apart: two can be lost before the
  // lease runs out.
  const auto tick =
      std::chrono::milliseconds(std::max<int64_t>(1000, opts_.lease_ttl_s * 1000 / 3));
  while (!stopping_) {
    t.expires_after(tick);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) break;
    if (lease_ == 0) {
      const Status st = co_await Join();
      Note(st, "join");
      if (!st.ok()) continue;
    } else {
      auto ttl = co_await etcd_.KeepAlive(lease_);
      Status kept;
      if (!ttl.ok()) kept = ttl.error();
      Note(kept, "keepalive");
      if (!ttl.ok()) continue;
      if (*ttl <= 0) {
        // etcd was out of reach longer than the lease: the cluster took
        // this node for gone and reported its sandboxes failed. Join
        // again, the way a restarted node does.
        spdlog::warn("cluster_lease_expired node={} (rejoining)", opts_.node);
        lease_ = 0;
        Note(co_await Join(), "join");
        continue;
      }
      Note(co_await Publish(), "publish");
    }
    Note(co_await RefreshNodes(), "nodes");
    Note(co_await Reconcile(), "reconcile");
  }
}

asio::awaitable<Status> Cluster::Join() {
  auto mine = co_await etcd_.Get(kNodes + opts_.node);
  if (!mine.ok()) co_return mine.error();
  if (!*mine) {
    // No record of this node: its lease expired while it was away (or it
    // never ran). What the cluster recorded for it was reported failed
    // meanwhile: delete those sandboxes rather than resurrect them.
    auto recs = co_await etcd_.Prefix(kNodeSandboxes + opts_.node + "/");
    if (!recs.ok()) co_return recs.error();
    std::set<std::string> local;
    for (const auto& [id, owner] : local_()) local.insert(id);
    for (const auto& kv : *recs) {
      const std::string id = Tail(kv.key, kNodeSandboxes + opts_.node + "/");
      if (local.count(id)) {
        spdlog::warn("cluster_drop sandbox={} node={} reason=\"failed while this node was gone\"",
                     id, opts_.node);
        co_await drop_(id);
      }
      if (auto st = co_await etcd_.Delete(kv.key); !st.ok()) co_return st;
      if (auto st = co_await etcd_.Delete(kSandboxes + id); !st.ok()) co_return st;
    }
  } else if ((*mine)->lease != 0) {
    // A restart within the lease: the old lease (and the reservations
    // under it) goes now; the record is made again under the new one.
    (void)co_await etcd_.Revoke((*mine)->lease);
  }
  auto lease = co_await etcd_.Grant(opts_.lease_ttl_s);
  if (!lease.ok()) co_return lease.error();
  lease_ = *lease;
  auto st = co_await Publish();
  if (st.ok())
    spdlog::info("cluster_joined node={} advertise={} lease_ttl_s={}", opts_.node, opts_.advertise,
                 opts_.lease_ttl_s);
  co_return st;
}

asio::awaitable<Status> Cluster::Publish() {
  nlohmann::json rec = nlohmann::json::object();
  if (describe_) rec = describe_();
  rec["name"] = opts_.node;
  rec["advertise"] = opts_.advertise;
  rec["state"] = "ready";
  rec["joined_lease"] = std::to_string(lease_);
  co_return co_await etcd_.Put(kNodes + opts_.node, rec.dump(), lease_);
}

asio::awaitable<Status> Cluster::RefreshNodes() {
  auto kvs = co_await etcd_.Prefix(kNodes);
  if (!kvs.ok()) co_return kvs.error();
  std::map<std::string, NodeInfo> fresh;
  for (const auto& kv : *kvs) {
    auto j = nlohmann::json::parse(kv.value, nullptr, false);
    if (!j.is_object()) continue;
    NodeInfo n;
    n.name = Tail(kv.key, kNodes);
    n.advertise = j.value("advertise", "");
    n.record = std::move(j);
    fresh[n.name] = std::move(n);
  }
  nodes_ = std::move(fresh);
  co_return Status{};
}

asio::awaitable<Status> Cluster::Reconcile() {
  // The records first, then the sandboxes: a create records itself after
  // it exists here, so a record read now is never for a sandbox that the
  // local list (read after it) lacks because it was not made yet.
  const std::string mine = kNodeSandboxes + opts_.node + "/";
  auto recs = co_await etcd_.Prefix(mine);
  if (!recs.ok()) co_return recs.error();
  std::set<std::string> recorded;
  for (const auto& kv : *recs) recorded.insert(Tail(kv.key, mine));
  std::set<std::string> local;
  for (const auto& [id, owner] : local_()) {
    local.insert(id);
    if (recorded.count(id)) continue;
    co_await Record(id, owner);
  }
  for (const auto& id : recorded) {
    if (local.count(id)) continue;
    // Deleted here (or expired): its records go.
    if (auto st = co_await etcd_.Delete(mine + id); !st.ok()) co_return st;
    auto home = co_await etcd_.Get(kSandboxes + id);
    if (!home.ok()) co_return home.error();
    if (*home) {
      auto j = nlohmann::json::parse((*home)->value, nullptr, false);
      if (j.is_object() && j.value("node", "") == opts_.node)
        if (auto st = co_await etcd_.Delete(kSandboxes + id); !st.ok()) co_return st;
    }
  }
  co_return Status{};
}

asio::awaitable<void> Cluster::Record(const std::string& id, const std::string& owner) {
  const std::string value = RecordValue(owner);
  std::vector<TxnOp> ops = {{TxnOp::Kind::kPut, kSandboxes + id, value, 0},
                            {TxnOp::Kind::kPut, kNodeSandboxes + opts_.node + "/" + id, value, 0}};
  auto made = co_await etcd_.TxnIfAbsent(kSandboxes + id, std::move(ops));
  if (!made.ok()) {
    Note(made.error(), "record");
    co_return;
  }
  if (*made) co_return;
  // The id has a record already: ours (a reconcile after a lost answer)
  // is fine; another node's would be an id issued twice.
  auto home = co_await etcd_.Get(kSandboxes + id);
  if (home.ok() && *home) {
    auto j = nlohmann::json::parse((*home)->value, nullptr, false);
    std::string node;
    if (j.is_object()) node = j.value("node", "");
    if (node == opts_.node) {
      (void)co_await etcd_.Put(kNodeSandboxes + opts_.node + "/" + id, value);
      co_return;
    }
    spdlog::error("cluster_id_collision sandbox={} node={} other={}", id, opts_.node, node);
  }
}

asio::awaitable<Result<std::optional<SandboxHome>>> Cluster::Lookup(const std::string& id) {
  SandboxHome h;
  if (auto c = owners_.find(id); c != owners_.end()) {
    ++lookups_cached_;
    h = c->second;
  } else {
    ++lookups_etcd_;
    auto kv = co_await etcd_.Get(kSandboxes + id);
    if (!kv.ok()) co_return kv.error();
    if (!*kv) co_return std::optional<SandboxHome>();
    auto j = nlohmann::json::parse((*kv)->value, nullptr, false);
    if (!j.is_object()) co_return std::optional<SandboxHome>();
    h.node = j.value("node", "");
    h.owner = j.value("owner", "");
    // Bounded: a full cache starts over (entries are one etcd read each).
    if (owners_.size() >= kOwnerCacheMax) owners_.clear();
    owners_[id] = h;
  }
  if (auto it = nodes_.find(h.node); it != nodes_.end()) {
    h.node_alive = true;
    h.advertise = it->second.advertise;
  } else {
    // A node that joined since the last tick (or left: then it is absent).
    auto n = co_await etcd_.Get(kNodes + h.node);
    if (!n.ok()) co_return n.error();
    if (*n) {
      auto nj = nlohmann::json::parse((*n)->value, nullptr, false);
      h.node_alive = nj.is_object();
      if (h.node_alive) h.advertise = nj.value("advertise", "");
    }
  }
  co_return std::optional<SandboxHome>(std::move(h));
}

asio::awaitable<Result<std::vector<std::pair<std::string, SandboxHome>>>> Cluster::Orphans() {
  auto kvs = co_await etcd_.Prefix(kSandboxes);
  if (!kvs.ok()) co_return kvs.error();
  std::vector<std::pair<std::string, SandboxHome>> out;
  for (const auto& kv : *kvs) {
    auto j = nlohmann::json::parse(kv.value, nullptr, false);
    if (!j.is_object()) continue;
    SandboxHome h;
    h.node = j.value("node", "");
    h.owner = j.value("owner", "");
    if (nodes_.count(h.node)) continue;
    out.emplace_back(Tail(kv.key, kSandboxes), std::move(h));
  }
  co_return out;
}

asio::awaitable<Result<Cluster::Placement>> Cluster::Place(const std::string& template_name,
                                                           const std::string& affinity) {
  if (auto st = co_await RefreshNodes(); !st.ok()) co_return st.error();
  // Copies: the tick refreshes nodes_ while this awaits etcd.
  std::vector<NodeInfo> candidates;
  for (const auto& [name, n] : nodes_) {
    if (!affinity.empty() ? name == affinity : n.has_template(template_name))
      candidates.push_back(n);
  }
  if (candidates.empty()) {
    if (!affinity.empty())
      co_return MakeError(
          Code::kInvalidRequest,
          "node '" + affinity + "' is not in the cluster (GET /v1/nodes lists them)");
    // No node lists the template (a build in progress, a name only the
    // create's own node resolves): this node answers the create.
    auto self = nodes_.find(opts_.node);
    if (self == nodes_.end())
      co_return MakeError(Code::kUnavailable, "this node has not joined the cluster yet");
    candidates.push_back(self->second);
  }
  // Optimistic: read each candidate's placement version, count what it
  // holds and what is reserved on it, then reserve on the best under a
  // txn that fails if another placement on that node came in between.
  bool widened = false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const NodeInfo* best = nullptr;
    int64_t best_free = 0, best_version = 0;
    for (const NodeInfo& node : candidates) {
      const NodeInfo* n = &node;
      auto guard = co_await etcd_.Get(kPlacement + n->name);
      if (!guard.ok()) co_return guard.error();
      const int64_t version = *guard ? (*guard)->version : 0;
      auto held = co_await etcd_.Prefix(kNodeSandboxes + n->name + "/");
      if (!held.ok()) co_return held.error();
      auto reserved = co_await etcd_.Prefix(kReservations + n->name + "/");
      if (!reserved.ok()) co_return reserved.error();
      const int64_t cap = n->record.value("/capacity/sandboxes"_json_pointer, int64_t{0});
      const int64_t free = cap - static_cast<int64_t>(held->size() + reserved->size());
      const bool better = !best || free > best_free || (free == best_free && n->name == opts_.node);
      if (better) {
        best = n;
        best_free = free;
        best_version = version;
      }
    }
    if (best_free <= 0 && affinity.empty() && !widened) {
      // Every node with the template is full: any node with room will do
      // (it copies the template first: server/cluster_templates.h).
      widened = true;
      candidates.clear();
      for (const auto& [name, n] : nodes_) candidates.push_back(n);
      continue;
    }
    if (best_free <= 0) {
      std::string why = "every node of the cluster is full";
      if (!affinity.empty()) why = "node '" + affinity + "' is full";
      co_return MakeError(Code::kCapacityExhausted, why);
    }
    const std::string rid = RandomHex(8);
    const std::string reservation = kReservations + best->name + "/" + rid;
    std::vector<TxnOp> ops = {{TxnOp::Kind::kPut, kPlacement + best->name, rid, 0},
                              {TxnOp::Kind::kPut, reservation, opts_.node, lease_}};
    auto won = co_await etcd_.TxnIfVersion(kPlacement + best->name, best_version, std::move(ops));
    if (!won.ok()) co_return won.error();
    if (*won) co_return Placement{*best, reservation};
  }
  co_return MakeError(Code::kUnavailable, "placement kept racing with other nodes; retry");
}

asio::awaitable<void> Cluster::Release(const std::string& reservation) {
  if (reservation.empty()) co_return;
  (void)co_await etcd_.Delete(reservation);
}

asio::awaitable<void> Cluster::PublishNow() {
  if (lease_ == 0) co_return;
  Note(co_await Publish(), "publish");
  co_await RefreshNow();
}

asio::awaitable<void> Cluster::RefreshNow() { Note(co_await RefreshNodes(), "nodes"); }

asio::awaitable<Result<std::string>> Cluster::ClaimIdempotency(const std::string& key,
                                                               const std::string& node) {
  const std::string k = kIdempotency + key;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto cur = co_await etcd_.Get(k);
    if (!cur.ok()) co_return cur.error();
    int64_t version = 0;
    if (*cur) {
      auto j = nlohmann::json::parse((*cur)->value, nullptr, false);
      std::string held;
      if (j.is_object()) held = j.value("node", "");
      if (nodes_.count(held)) co_return held;
      // Its node left (the sandbox was lost with it): the key is free.
      version = (*cur)->version;
    }
    if (idem_lease_ == 0 ||
        std::chrono::steady_clock::now() - idem_lease_at_ > kIdempotencyLeaseRenew) {
      auto lease = co_await etcd_.Grant(kIdempotencyLeaseS);
      if (!lease.ok()) co_return lease.error();
      idem_lease_ = *lease;
      idem_lease_at_ = std::chrono::steady_clock::now();
    }
    const std::string value = nlohmann::json{{"node", node}}.dump();
    std::vector<TxnOp> ops = {{TxnOp::Kind::kPut, k, value, idem_lease_}};
    auto won = co_await etcd_.TxnIfVersion(k, version, std::move(ops));
    if (!won.ok()) co_return won.error();
    if (*won) co_return node;
  }
  co_return MakeError(Code::kUnavailable, "idempotency key kept racing with other nodes; retry");
}

asio::awaitable<void> Cluster::Leave() {
  stopping_ = true;
  if (lease_ != 0) (void)co_await etcd_.Revoke(lease_);
  lease_ = 0;
}

}  // namespace hutch::cluster
