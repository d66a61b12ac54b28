// NetworkManager: the host side of sandbox networking. It owns a pool of
// /30 subnets ("slots"), one per sandbox with a network: slot k has the
// network pool+4k, the host's end of a veth pair at +1 (the sandbox's
// gateway and DNS server) and the sandbox's `eth0` at +2, inside a named
// network namespace (`<netns_dir>/hutch-<tag>-<k>`) that the jail driver
// joins. A few slots are kept warm (namespace, veth, addresses, routes,
// DNS listener ready), so a create pays only for one nftables transaction.
// The namespaces and veths are made and removed from hutchd itself
// (slot_plumbing.h: a bind mount, rtnetlink) on a worker thread, so the
// I/O thread keeps serving creates while the pool refills.
//
// Enforcement is one nftables table per hutchd (nft_ruleset.h): base
// chains for what every sandbox gets, a chain per slot for its policy.
// Domain rules go through the DNS proxy (dns_proxy.h): names a policy
// allows are forwarded upstream, their A records are put in the slot's
// resolved set (with the answer's TTL) before the answer reaches the
// sandbox.
//
// Ownership: a slot belongs to the manager while warm, to a sandbox from
// Acquire to Release. After a crash the namespaces (bind mounts under
// netns_dir), veths and the table outlive hutchd: Adopt takes back the
// slots of adopted sandboxes and ReconcileAtStart removes the rest.
// Runs on the I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/blocking_worker.h"
#include "common/result.h"
#include "net/net_policy.h"
#include "net/nft_ruleset.h"
#include "net/rtnetlink.h"
#include "net/slot_plumbing.h"

namespace hutch::net {

namespace asio = boost::asio;

class DnsProxy;

struct NetworkOptions {
  std::string tag;  // this server's short tag (≤ 9 chars): table, interface and namespace names
  Cidr pool;        // /30 per slot, prefix between /16 and /28
  // Where allowed names are resolved; unset: the first IPv4 nameserver of
  // the host's /etc/resolv.conf.
  std::optional<asio::ip::udp::endpoint> dns_upstream;
  // Kept ready; the target grows with recent demand up to 4x this and is
  // refilled in batches once down to half.
  int warm = 8;
  std::string netns_dir = "/run/netns";
  uint16_t dns_port = 53;
  // Non-public ranges the operator lets sandboxes reach (--net-allow-private;
  // see non_public.h for what is refused otherwise).
  std::vector<Cidr> allow_private;
  // Per sandbox: connections tracked at once, new connections a second
  // (BaseTableOptions; 0 = no limit).
  int max_connections = 4096;
  int new_connections_per_second = 500;
};

// What a sandbox with a network runs with.
struct NetLease {
  int slot = -1;
  std::string netns_path;
  std::string address;  // the sandbox's (eth0)
  std::string gateway;  // the host's end: route and DNS server
  std::string resolv_conf;
};

class NetworkManager {
 public:
  ~NetworkManager();
  NetworkManager(const NetworkManager&) = delete;
  NetworkManager& operator=(const NetworkManager&) = delete;

  // Checks the host (the nft binary, IPv4 forwarding, which it turns on),
  // makes netns_dir a shared mount point (as ip-netns does), replaces this
  // server's nftables table with fresh base chains in one transaction
  // (slots of sandboxes that outlived a crash drop everything new until
  // Adopt re-applies their policy), and starts the DNS proxy. No slot
  // exists yet.
  static asio::awaitable<Result<std::unique_ptr<NetworkManager>>> Start(asio::io_context& io,
                                                                        NetworkOptions opts);

  // A slot for a new sandbox, with `policy` enforced before this returns.
  asio::awaitable<Result<NetLease>> Acquire(const NetworkPolicy& policy);
  // Replaces a slot's policy; holds for new connections at once (flows it
  // already admitted go on). Addresses learned by DNS are forgotten.
  asio::awaitable<Status> SetPolicy(int slot, const NetworkPolicy& policy);
  // Removes the slot's rules, namespace and veth. Call after the sandbox's
  // processes are gone. Idempotent.
  asio::awaitable<void> Release(int slot);

  // After a restart, before ReconcileAtStart: takes back `slot` for an
  // adopted sandbox (its namespace must still exist) and re-applies its
  // policy.
  asio::awaitable<Result<NetLease>> Adopt(int slot, const NetworkPolicy& policy);
  // Removes every namespace and veth of this tag that no adopted sandbox
  // holds (what a crashed run left), then fills the warm pool. Returns how
  // many slots were removed.
  asio::awaitable<int> ReconcileAtStart();
  // Removes warm slots; with no slot left in use, the table too.
  asio::awaitable<void> Shutdown();

  struct SlotCounters {
    uint64_t rx_bytes = 0;  // into the sandbox
    uint64_t tx_bytes = 0;  // out of the sandbox
  };
  SlotCounters Counters(int slot) const;
  size_t in_use() const { return leased_.size(); }
  // The slot's namespace (a bind mount under netns_dir) and the nft
  // binary: the vault's egress proxy works inside a sandbox's namespace.
  std::string NetnsPath(int slot) const { return opts_.netns_dir + "/" + NetnsName(slot); }
  const std::string& nft_bin() const { return nft_bin_; }
  size_t warm() const { return warm_.size(); }

 private:
  NetworkManager(asio::io_context& io, NetworkOptions opts, std::string nft,
                 std::unique_ptr<RtNetlink> host_nl);
  NetLease LeaseOf(int slot) const;
  // The base chains' settings (reads the host's interfaces).
  BaseTableOptions BaseOptions() const;
  std::string NetnsName(int slot) const;
  uint32_t SlotBase(int slot) const { return opts_.pool.addr + 4u * static_cast<uint32_t>(slot); }
  int max_slots() const { return 1 << (32 - opts_.pool.prefix - 2); }
  // The slot whose sandbox address is `a`, or -1.
  int SlotOfSandboxAddress(uint32_t a) const;
  // A slot nobody uses: not ours, and none of its addresses on any host
  // interface (another hutchd sharing the pool, or anything else there).
  std::optional<int> FreeSlot() const;
  // MakeSlot on free slots until one works (a slot another server took at
  // the same moment fails on its DNS listener and is skipped).
  asio::awaitable<Result<int>> MakeAnySlot();
  asio::awaitable<Status> MakeSlot(int slot);
  // Up to `count` warm slots made together, their rules already mode
  // `all`; empty when the batch failed as a whole.
  asio::awaitable<std::vector<int>> MakeWarmBatch(int count);
  // What BuildSlot and TearDownSlot need to know of a slot.
  SlotPlumbing PlumbingOf(int slot) const;
  // The DNS listener on the slot's gateway, after its kernel objects.
  Status FinishSlot(int slot);
  asio::awaitable<void> RemoveSlot(int slot);
  asio::awaitable<Status> Nft(const std::string& script);
  // How many warm slots to keep now (follows recent demand, bounded).
  int WarmTarget();
  bool WarmNeedsRefill();
  void RefillWarm();
  asio::awaitable<void> OnResolved(uint32_t client, std::vector<uint32_t> addrs, uint32_t ttl);

  asio::io_context& io_;
  NetworkOptions opts_;
  NftNames names_;
  std::string nft_bin_;
  std::unique_ptr<DnsProxy> dns_;
  // A socket in the host's namespace, used only on worker_'s thread
  // (declared before worker_: it outlives the worker's last call).
  std::unique_ptr<RtNetlink> host_nl_;
  BlockingWorker worker_;
  std::deque<int> warm_;
  std::set<int> making_;  // being made (warm refill in flight)
  // Warm slots whose rules already say mode `all` (the common request, so
  // its create skips the nft run; no process is in a warm slot).
  std::set<int> warm_all_;
  std::set<int> foreign_;   // failed to make: someone else's (skipped)
  std::set<int> removing_;  // RemoveSlot in flight: not free until it ends
  std::map<int, NetworkPolicy> leased_;
  // When recent Acquires happened (the last kDemandWindow): WarmTarget.
  std::deque<std::chrono::steady_clock::time_point> recent_acquires_;
  bool refilling_ = false;
  bool stopped_ = false;
  // Shared with detached coroutines (warm refill) so they notice a
  // destroyed manager.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace hutch::net
