// This hutchd as one node of a cluster coordinated through etcd (issue
// 27). etcd holds the whole shared state; hutch runs no consensus or
// membership protocol of its own. The keys (values JSON):
//
//   /hutch/nodes/<node>                 the node's record (advertise URL,
//                                       capacity, templates, drivers,
//                                       version, state), under the node's
//                                       lease: it vanishes when the node
//                                       stops keeping the lease alive
//   /hutch/sandboxes/<id>               {"node","owner"}: who holds a
//                                       sandbox; written with a txn that
//                                       requires the key to be absent, so
//                                       an id is issued once cluster-wide
//   /hutch/node-sandboxes/<node>/<id>   the same, by node (a node lists
//                                       its own records with one range)
//   /hutch/placement/<node>             bumped by every placement on the
//                                       node: its version is the guard of
//                                       the placement txn
//   /hutch/reservations/<node>/<rid>    a create placed on the node and
//                                       not recorded yet (under the
//                                       placing node's lease)
//   /hutch/idempotency/<hash>           {"node"}: the node a create with an
//                                       Idempotency-Key went to (hash of
//                                       the key's owner and the key), under
//                                       a lease of a day and an hour: a
//                                       retry through any node goes there
//
// A node whose lease expired is gone: the others report its sandboxes
// failed (reason naming it). When it comes back (its record absent at
// join), the sandboxes recorded for it were failed in its absence: it
// deletes them instead of resurrecting them. etcd unreachable: the node
// keeps serving its own sandboxes and retries every tick.
// Lives on the I/O thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/etcd_client.h"
#include "common/result.h"

namespace hutch::cluster {

struct ClusterOptions {
  std::vector<std::string> etcd;  // endpoints
  EtcdTls etcd_tls;               // for https:// endpoints
  std::string node;               // this node's name
  std::string advertise;          // "http://HOST:PORT" other nodes reach it at
  // The node's lease: how long after its last keepalive it counts as gone.
  int64_t lease_ttl_s = 10;
};

struct NodeInfo {
  std::string name;
  std::string advertise;  // http://HOST:PORT
  nlohmann::json record;  // as published
  // Free sandbox slots the record announces (capacity minus used).
  int64_t free_slots() const;
  bool has_template(const std::string& name) const;
  // A volume lives on the node whose record lists it.
  bool has_volume(const std::string& name) const;
};

// Where a sandbox lives, from its record.
struct SandboxHome {
  std::string node;
  std::string owner;  // owner id (auth::Principal::owner) of its creator
  bool node_alive = false;
  std::string advertise;  // of its node, when alive
};

class Cluster {
 public:
  // What the node's record says besides name and URL (capacity, templates,
  // drivers, version, used): asked at every publish.
  using Describe = std::function<nlohmann::json()>;
  // The sandboxes this node holds now: id and owner (the creating key's
  // owner id).
  using LocalIds = std::function<std::vector<std::pair<std::string, std::string>>()>;
  // Deletes a sandbox of this node that the cluster failed meanwhile.
  using DropLocal = std::function<asio::awaitable<void>(std::string id)>;

  Cluster(asio::any_io_executor ex, ClusterOptions opts, Describe describe, LocalIds local,
          DropLocal drop);

  // Joins (record under a fresh lease) and keeps the membership going in
  // the background; the first join is awaited so the node is listed before
  // it serves. An etcd that does not answer yet is no error: the loop
  // retries.
  asio::awaitable<void> Start();

  const std::string& node() const { return opts_.node; }
  const std::string& advertise() const { return opts_.advertise; }
  // The nodes as last read (every tick), this one included while joined.
  const std::map<std::string, NodeInfo>& nodes() const { return nodes_; }
  // Whether the last call to etcd succeeded.
  bool etcd_reachable() const { return etcd_ok_; }

  // Records that this node holds `id` (a create or fork just made it).
  // Awaited before the create is answered; etcd not answering is logged
  // and the record is made by the next reconcile.
  asio::awaitable<void> Record(const std::string& id, const std::string& owner);
  // Where `id` lives (nullopt: no record; etcd down: an error). A
  // sandbox never moves, so its node is cached after the first read
  // (whether that node is alive, and its URL, come from the current nodes
  // view each time); `Forget` drops an entry that proved wrong (the node
  // answered 404 or could not be reached, the sandbox was deleted).
  asio::awaitable<Result<std::optional<SandboxHome>>> Lookup(const std::string& id);
  void Forget(const std::string& id) { owners_.erase(id); }
  // Owner lookups answered from the cache / from etcd, since start.
  uint64_t lookups_cached() const { return lookups_cached_; }
  uint64_t lookups_etcd() const { return lookups_etcd_; }
  // Every sandbox record whose node is gone (they are reported failed).
  asio::awaitable<Result<std::vector<std::pair<std::string, SandboxHome>>>> Orphans();

  // The node a create goes to: `affinity` when given (it must be alive),
  // else the live node with the most free slots that has `template_name`
  // (this node on a tie; when every node with it is full, any node with
  // room, which then copies the template). The choice is taken under a txn on the node's
  // placement key, with a reservation that counts against the node until
  // `Release` (or the placing node's lease ends), so two nodes placing at
  // once never overbook one.
  struct Placement {
    NodeInfo node;
    std::string reservation;  // key to release
  };
  asio::awaitable<Result<Placement>> Place(const std::string& template_name,
                                           const std::string& affinity);
  asio::awaitable<void> Release(const std::string& reservation);

  // Rewrites this node's record now (a volume was made or deleted: other
  // nodes place its sandboxes by it).
  asio::awaitable<void> PublishNow();
  // Reads the nodes again now (not at the next tick): what a request
  // decides by must include what another node just published.
  asio::awaitable<void> RefreshNow();

  // The node a create under the idempotency key `key` (already hashed)
  // goes to: the node recorded for it while that node is alive, else
  // `node`, recorded now. Two nodes claiming at once agree (a txn).
  asio::awaitable<Result<std::string>> ClaimIdempotency(const std::string& key,
                                                        const std::string& node);

  // Stops the loop and revokes the lease (a clean shutdown leaves at once).
  asio::awaitable<void> Leave();

 private:
  asio::awaitable<void> Run();
  asio::awaitable<Status> Join();
  asio::awaitable<Status> Publish();
  asio::awaitable<Status> RefreshNodes();
  asio::awaitable<Status> Reconcile();
  std::string RecordValue(const std::string& owner) const;
  void Note(const Status& st, const char* what);

  asio::any_io_executor ex_;
  ClusterOptions opts_;
  Describe describe_;
  LocalIds local_;
  DropLocal drop_;
  EtcdClient etcd_;
  int64_t lease_ = 0;
  // The lease idempotency records go under, granted anew every hour.
  int64_t idem_lease_ = 0;
  std::chrono::steady_clock::time_point idem_lease_at_;
  bool etcd_ok_ = false;
  bool stopping_ = false;
  std::map<std::string, NodeInfo> nodes_;
  // Sandbox id -> {node, owner} (SandboxHome without the liveness).
  std::map<std::string, SandboxHome> owners_;
  uint64_t lookups_cached_ = 0, lookups_etcd_ = 0;
};

}  // namespace hutch::cluster
