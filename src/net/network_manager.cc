#include "net/network_manager.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/subprocess.h"
#include "net/dns_policy.h"
#include "net/dns_proxy.h"
#include "net/named_netns.h"
#include "net/non_public.h"

namespace hutch::net {

namespace fs = std::filesystem;

namespace {

constexpr auto kToolTimeout = std::chrono::seconds(20);
// Addresses learned by DNS stay allowed at least this long (a TTL of 0
// would otherwise expire before the sandbox connects) and at most this.
constexpr uint32_t kResolvedTtlFloor = 30;
constexpr uint32_t kResolvedTtlCeiling = 3600;
// The warm pool's target follows demand: the creates of the last
// kDemandWindow, between --net-warm and kWarmGrowth times it. A burst then
// refills in larger batches (fewer nft runs competing with its creates);
// once it passes, slots taken are no longer replaced beyond --net-warm.
constexpr auto kDemandWindow = std::chrono::seconds(5);
constexpr int kWarmGrowth = 4;

// The first IPv4 nameserver of the host's resolv.conf.
std::optional<asio::ip::udp::endpoint> HostResolver() {
  std::ifstream in("/etc/resolv.conf");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string key, value;
    if (!(f >> key >> value) || key != "nameserver") continue;
    uint32_t a;
    if (ParseIpv4(value, &a)) return asio::ip::udp::endpoint(asio::ip::address_v4(a), 53);
  }
  return std::nullopt;
}

DnsPolicy ToDnsPolicy(const NetworkPolicy& p) {
  DnsPolicy d;
  d.allow_all = p.mode == NetMode::kAll;
  d.default_allow = p.mode == NetMode::kPolicy && p.default_allow;
  if (p.mode == NetMode::kPolicy) {
    d.allow = p.allow_domains;
    d.deny = p.deny_domains;
  }
  return d;
}

uint64_t ReadCounter(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  in >> v;
  return v;
}

}  // namespace

NetworkManager::NetworkManager(asio::io_context& io, NetworkOptions opts, std::string nft,
                               std::unique_ptr<RtNetlink> host_nl)
    : io_(io),
      opts_(std::move(opts)),
      nft_bin_(std::move(nft)),
      host_nl_(std::move(host_nl)),
      worker_(io) {
  names_.prefix = opts_.tag;
}

NetworkManager::~NetworkManager() {
  *alive_ = false;
  if (dns_) dns_->Stop();
}

BaseTableOptions NetworkManager::BaseOptions() const {
  BaseTableOptions o;
  o.pool = opts_.pool;
  o.dns_port = opts_.dns_port;
  o.non_public = NonPublicNetworks(HostNetworks(opts_.pool, names_.prefix));
  o.allow_private = opts_.allow_private;
  o.max_connections = opts_.max_connections;
  o.new_connections_per_second = opts_.new_connections_per_second;
  return o;
}

asio::awaitable<Result<std::unique_ptr<NetworkManager>>> NetworkManager::Start(
    asio::io_context& io, NetworkOptions opts) {
  if (opts.tag.empty() || opts.tag.size() > 9)
    co_return MakeError(Code::kInvalidRequest, "network tag must be 1 to 9 characters");
  if (opts.pool.prefix < 16 || opts.pool.prefix > 28)
    co_return MakeError(Code::kInvalidRequest, "network pool " + opts.pool.ToString() +
                                                   " must be between a /16 and a /28");
  std::string nft = FindTool("nft");
  if (nft.empty())
    co_return MakeError(Code::kUnavailable, "the nft tool (nftables) is not installed");
  // Sandboxes reach the world through the host: routing between
  // interfaces must be on. (A host-wide setting, left on at exit: other
  // software may rely on it too.)
  {
    std::ofstream fwd("/proc/sys/net/ipv4/ip_forward");
    fwd << "1\n";
    fwd.flush();
    if (!fwd)
      co_return MakeError(Code::kUnavailable,
                          "cannot enable IPv4 forwarding (/proc/sys/net/ipv4/ip_forward)");
  }
  if (auto st = PrepareNetnsDir(opts.netns_dir); !st.ok())
    co_return MakeError(Code::kUnavailable, st.error().message)
        .Context("network namespaces directory");
  auto host_nl = RtNetlink::Open();
  if (!host_nl.ok()) co_return MakeError(Code::kUnavailable, host_nl.error().message);
  auto upstream = opts.dns_upstream ? opts.dns_upstream : HostResolver();
  std::unique_ptr<NetworkManager> m(new NetworkManager(
      io, std::move(opts), nft, std::make_unique<RtNetlink>(std::move(host_nl).value())));
  // One transaction: the old table (a crashed run's) goes and the new base
  // chains come; no instant without filtering.
  std::string script = "add table inet " + m->names_.table() + "\n" + DeleteTableScript(m->names_) +
                       BaseTableScript(m->names_, m->BaseOptions());
  if (auto st = co_await m->Nft(script); !st.ok())
    co_return st.error().Context("install nftables table");

  DnsProxyOptions dopts;
  if (upstream) dopts.upstream = *upstream;
  else
    spdlog::warn(
        "net no_dns_upstream (no IPv4 nameserver in /etc/resolv.conf): allowed names get SERVFAIL");
  NetworkManager* self = m.get();
  std::weak_ptr<bool> alive = m->alive_;
  m->dns_ = std::make_unique<DnsProxy>(
      io, dopts,
      [self, alive](const asio::ip::address& client) -> std::optional<DnsPolicy> {
        if (alive.expired() || !client.is_v4()) return std::nullopt;
        int slot = self->SlotOfSandboxAddress(client.to_v4().to_uint());
        auto it = self->leased_.find(slot);
        if (it == self->leased_.end()) return std::nullopt;
        return ToDnsPolicy(it->second);
      },
      [self, alive](const asio::ip::address& client, const std::string&,
                    std::vector<asio::ip::address_v4> addrs,
                    uint32_t ttl) -> asio::awaitable<void> {
        if (alive.expired() || !client.is_v4()) co_return;
        std::vector<uint32_t> a;
        for (const auto& x : addrs) a.push_back(x.to_uint());
        co_await self->OnResolved(client.to_v4().to_uint(), std::move(a), ttl);
      });
  spdlog::info("net started pool={} table={} dns_upstream={}", m->opts_.pool.ToString(),
               m->names_.table(), upstream ? upstream->address().to_string() : std::string("none"));
  co_return m;
}

std::string NetworkManager::NetnsName(int slot) const {
  return "hutch-" + opts_.tag + "-" + std::to_string(slot);
}

NetLease NetworkManager::LeaseOf(int slot) const {
  NetLease l;
  l.slot = slot;
  l.netns_path = opts_.netns_dir + "/" + NetnsName(slot);
  l.gateway = Ipv4ToString(SlotBase(slot) + 1);
  l.address = Ipv4ToString(SlotBase(slot) + 2);
  l.resolv_conf = "nameserver " + l.gateway + "\noptions edns0\n";
  return l;
}

int NetworkManager::SlotOfSandboxAddress(uint32_t a) const {
  if (!opts_.pool.Contains(a) || (a & 3u) != 2u) return -1;
  return static_cast<int>((a - opts_.pool.addr) / 4);
}

std::optional<int> NetworkManager::FreeSlot() const {
  std::set<int> taken(warm_.begin(), warm_.end());
  taken.insert(making_.begin(), making_.end());
  taken.insert(foreign_.begin(), foreign_.end());
  taken.insert(removing_.begin(), removing_.end());
  for (const auto& [s, p] : leased_) taken.insert(s);
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
      if (opts_.pool.Contains(a)) taken.insert(static_cast<int>((a - opts_.pool.addr) / 4));
    }
    freeifaddrs(ifs);
  }
  for (int s = 0; s < max_slots(); ++s)
    if (!taken.count(s)) return s;
  return std::nullopt;
}

asio::awaitable<Result<int>> NetworkManager::MakeAnySlot() {
  Error last = MakeError(Code::kCapacityExhausted, "every subnet of the network pool " +
                                                       opts_.pool.ToString() + " is in use");
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto slot = FreeSlot();
    if (!slot) break;
    making_.insert(*slot);
    auto st = co_await MakeSlot(*slot);
    making_.erase(*slot);
    if (st.ok()) co_return *slot;
    last = st.error();
    foreign_.insert(*slot);
    spdlog::warn("net slot={} unusable, trying another err=\"{}\"", *slot, last.message);
  }
  co_return last;
}

asio::awaitable<Status> NetworkManager::Nft(const std::string& script) {
  std::vector<std::string> argv = {nft_bin_, "-f", "-"};
  co_return co_await RunToolWithInput(argv, &script, kToolTimeout);
}

SlotPlumbing NetworkManager::PlumbingOf(int slot) const {
  SlotPlumbing p;
  p.netns_dir = opts_.netns_dir;
  p.netns_name = NetnsName(slot);
  p.host_if = names_.host_if(slot);
  p.gateway = SlotBase(slot) + 1;
  p.address = SlotBase(slot) + 2;
  return p;
}

Status NetworkManager::FinishSlot(int slot) {
  if (dns_) {
    const std::string gw = Ipv4ToString(SlotBase(slot) + 1);
    auto port = dns_->AddListener(asio::ip::make_address(gw), opts_.dns_port);
    if (!port.ok()) return port.error().Context("DNS listener on " + gw);
  }
  return Status{};
}

asio::awaitable<Status> NetworkManager::MakeSlot(int slot) {
  RtNetlink* nl = host_nl_.get();
  auto build = [nl, p = PlumbingOf(slot)] { return BuildSlot(*nl, p); };
  Status st = co_await worker_.Run(std::move(build));
  if (!st.ok()) co_return st.error().Context("prepare network slot " + std::to_string(slot));
  if (st = FinishSlot(slot); !st.ok()) {
    co_await RemoveSlot(slot);
    co_return st.error().Context("prepare network slot " + std::to_string(slot));
  }
  co_return Status{};
}

asio::awaitable<std::vector<int>> NetworkManager::MakeWarmBatch(int count) {
  // The slots' kernel objects in one call on the worker's thread (no
  // process: slot_plumbing.h), then one nft transaction for all their
  // mode-`all` rules: an nft run costs ≈ 10–25 ms of process start and
  // netlink cache here whatever it does, so a burst of creates would drain
  // the pool faster than one-slot-per-run refills it.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> batch;
  std::vector<SlotPlumbing> plans;
  for (int i = 0; i < count; ++i) {
    auto s = FreeSlot();
    if (!s) break;
    making_.insert(*s);
    batch.push_back(*s);
    plans.push_back(PlumbingOf(*s));
  }
  std::vector<int> made;
  if (batch.empty()) co_return made;
  RtNetlink* nl = host_nl_.get();
  auto build = [nl, plans = std::move(plans)] {
    std::vector<Status> out;
    for (const auto& p : plans) out.push_back(BuildSlot(*nl, p));
    return out;
  };
  std::vector<Status> built = co_await worker_.Run(std::move(build));
  const double build_ms = MsSince(t0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int s = batch[i];
    Status st = built[i];
    if (st.ok()) st = FinishSlot(s);
    else foreign_.insert(s);  // its names or addresses are someone else's: skipped from now on
    if (!st.ok()) {
      spdlog::warn("net slot={} unusable, trying another err=\"{}\"", s, st.error().message);
      if (!foreign_.count(s)) co_await RemoveSlot(s);
      making_.erase(s);
      continue;
    }
    made.push_back(s);
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (!made.empty()) {
    NetworkPolicy all;
    all.mode = NetMode::kAll;
    std::string rules;
    for (int s : made) rules += SlotPolicyScript(names_, s, all, true);
    if (auto r = co_await Nft(rules); r.ok()) warm_all_.insert(made.begin(), made.end());
    else spdlog::warn("net warm_policy_failed slots={} err=\"{}\"", made.size(), r.error().message);
  }
  for (int s : made) making_.erase(s);
  spdlog::debug("net warm_batch slots={} made={} kernel_ms={:.2f} nft_ms={:.2f} per_slot_ms={:.2f}",
                batch.size(), made.size(), build_ms, MsSince(t1),
                MsSince(t0) / static_cast<double>(batch.size()));
  co_return made;
}

asio::awaitable<void> NetworkManager::RemoveSlot(int slot) {
  const auto t0 = std::chrono::steady_clock::now();
  warm_all_.erase(slot);
  removing_.insert(slot);
  const std::string gw = Ipv4ToString(SlotBase(slot) + 1);
  if (dns_) dns_->RemoveListener(asio::ip::make_address(gw));
  // Each step on its own: whatever is already gone must not keep the rest
  // from going.
  auto st = co_await Nft(SlotRemoveScript(names_, slot));
  if (!st.ok()) {
    for (const auto& c : SlotRemoveCommands(names_, slot)) (void)co_await Nft(c + "\n");
  }
  const double nft_ms = MsSince(t0);
  const auto t1 = std::chrono::steady_clock::now();
  RtNetlink* nl = host_nl_.get();
  auto teardown = [nl, p = PlumbingOf(slot)] { return TearDownSlot(*nl, p); };
  if (auto d = co_await worker_.Run(std::move(teardown)); !d.ok())
    spdlog::error("net slot={} remove_failed err=\"{}\"", slot, d.error().message);
  removing_.erase(slot);
  spdlog::debug("net slot_removed slot={} nft_ms={:.2f} kernel_ms={:.2f}", slot, nft_ms,
                MsSince(t1));
}

int NetworkManager::WarmTarget() {
  const auto now = std::chrono::steady_clock::now();
  while (!recent_acquires_.empty() && now - recent_acquires_.front() > kDemandWindow)
    recent_acquires_.pop_front();
  const int demand = static_cast<int>(recent_acquires_.size());
  return std::clamp(demand, opts_.warm, opts_.warm * kWarmGrowth);
}

bool NetworkManager::WarmNeedsRefill() {
  const int have = static_cast<int>(warm_.size() + making_.size()), target = WarmTarget();
  // Refilled in batches: only once the pool is down to half of its
  // target (or empty), then back to the target, so each nft run serves
  // several slots (see MakeWarmBatch). Topping up one slot at a time would
  // cost a whole nft run per slot.
  return have < target && (have <= target / 2 || warm_.empty());
}

void NetworkManager::RefillWarm() {
  if (refilling_ || stopped_ || !WarmNeedsRefill()) return;
  refilling_ = true;
  std::weak_ptr<bool> alive = alive_;
  asio::co_spawn(
      io_,
      [this, alive]() -> asio::awaitable<void> {
        while (!alive.expired() && !stopped_ && WarmNeedsRefill()) {
          const int need = WarmTarget() - static_cast<int>(warm_.size() + making_.size());
          std::vector<int> made = co_await MakeWarmBatch(need);
          if (alive.expired()) co_return;
          if (made.empty()) {
            // The batch failed as a whole: one slot at a time, skipping the
            // ones that are not ours to take.
            auto slot = co_await MakeAnySlot();
            if (alive.expired()) co_return;
            if (!slot.ok()) {
              spdlog::error("net warm_slot_failed err=\"{}\"", slot.error().message);
              break;
            }
            made.push_back(*slot);
          }
          for (int s : made) {
            if (stopped_) co_await RemoveSlot(s);
            else warm_.push_back(s);
          }
        }
        if (!alive.expired()) refilling_ = false;
      },
      asio::detached);
}

asio::awaitable<Result<NetLease>> NetworkManager::Acquire(const NetworkPolicy& policy) {
  if (stopped_) co_return MakeError(Code::kUnavailable, "networking is shutting down");
  recent_acquires_.push_back(std::chrono::steady_clock::now());
  int slot;
  if (!warm_.empty()) {
    slot = warm_.front();
    warm_.pop_front();
  } else {
    auto made = co_await MakeAnySlot();
    if (!made.ok()) co_return made.error();
    slot = *made;
  }
  leased_[slot] = policy;
  // A warm slot made ready for mode `all` needs nothing more for it; any
  // other policy replaces those rules before the sandbox starts.
  const bool ready =
      warm_all_.erase(slot) > 0 && policy.mode == NetMode::kAll && policy.private_hosts.empty();
  if (!ready) {
    if (auto st = co_await Nft(SlotPolicyScript(names_, slot, policy, true)); !st.ok()) {
      leased_.erase(slot);
      co_await RemoveSlot(slot);
      co_return st.error().Context("apply network policy");
    }
  }
  RefillWarm();
  co_return LeaseOf(slot);
}

asio::awaitable<Status> NetworkManager::SetPolicy(int slot, const NetworkPolicy& policy) {
  auto it = leased_.find(slot);
  if (it == leased_.end())
    co_return MakeError(Code::kInternal, "network slot " + std::to_string(slot) + " is not leased");
  // The exceptions of the policy being replaced go in the same
  // transaction (they exist: the old policy's script added them).
  const std::string script = PrivateHostsRemoveScript(names_, slot, it->second.private_hosts) +
                             SlotPolicyScript(names_, slot, policy, true);
  if (auto st = co_await Nft(script); !st.ok())
    co_return st.error().Context("apply network policy");
  // Looked up again: the map may have changed while nft ran.
  if (auto again = leased_.find(slot); again != leased_.end()) again->second = policy;
  co_return Status{};
}

asio::awaitable<void> NetworkManager::Release(int slot) {
  auto it = leased_.find(slot);
  if (it == leased_.end()) co_return;
  const std::vector<uint32_t> hosts = std::move(it->second.private_hosts);
  leased_.erase(it);
  // Keyed by interface name, which the slot's next sandbox reuses: an
  // exception left behind would be that sandbox's.
  if (!hosts.empty()) {
    if (auto st = co_await Nft(PrivateHostsRemoveScript(names_, slot, hosts)); !st.ok())
      spdlog::error("net slot={} private_hosts_remove_failed err=\"{}\"", slot, st.error().message);
  }
  co_await RemoveSlot(slot);
}

asio::awaitable<Result<NetLease>> NetworkManager::Adopt(int slot, const NetworkPolicy& policy) {
  if (slot < 0 || slot >= max_slots())
    co_return MakeError(Code::kInternal, "network slot out of the pool");
  NetLease l = LeaseOf(slot);
  if (!fs::exists(l.netns_path) || !fs::exists("/sys/class/net/" + names_.host_if(slot)))
    co_return MakeError(Code::kNotFound,
                        "network namespace of slot " + std::to_string(slot) + " is gone");
  leased_[slot] = policy;
  if (auto st = co_await Nft(SlotPolicyScript(names_, slot, policy, true)); !st.ok()) {
    leased_.erase(slot);
    co_return st.error().Context("re-apply network policy");
  }
  if (dns_) {
    auto port = dns_->AddListener(asio::ip::make_address(l.gateway), opts_.dns_port);
    if (!port.ok()) {
      leased_.erase(slot);
      co_return port.error().Context("DNS listener on " + l.gateway);
    }
  }
  co_return l;
}

asio::awaitable<int> NetworkManager::ReconcileAtStart() {
  // Slots are found by their names: namespaces hutch-<tag>-<k> and host
  // interfaces <tag>v<k>; other servers' tags are left alone.
  std::set<int> leftover;
  const std::string ns_prefix = "hutch-" + opts_.tag + "-", if_prefix = opts_.tag + "v";
  auto slot_of = [](const std::string& name, const std::string& prefix) -> int {
    if (name.rfind(prefix, 0) != 0) return -1;
    std::string rest = name.substr(prefix.size());
    if (rest.empty() || rest.size() > 6 ||
        rest.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::stoi(rest);
  };
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opts_.netns_dir, ec))
    if (int s = slot_of(e.path().filename().string(), ns_prefix); s >= 0 && !leased_.count(s))
      leftover.insert(s);
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec))
    if (int s = slot_of(e.path().filename().string(), if_prefix); s >= 0 && !leased_.count(s))
      leftover.insert(s);
  for (int s : leftover) {
    spdlog::info("net slot={} removed (left by an earlier run)", s);
    co_await RemoveSlot(s);
  }
  RefillWarm();
  co_return static_cast<int>(leftover.size());
}

asio::awaitable<void> NetworkManager::Shutdown() {
  stopped_ = true;
  while (!warm_.empty()) {
    int s = warm_.front();
    warm_.pop_front();
    co_await RemoveSlot(s);
  }
  if (leased_.empty())
    (void)co_await Nft("add table inet " + names_.table() + "\n" + DeleteTableScript(names_));
  if (dns_) dns_->Stop();
}

NetworkManager::SlotCounters NetworkManager::Counters(int slot) const {
  // The host end's receive is the sandbox's transmit and vice versa.
  const std::string base = "/sys/class/net/" + names_.host_if(slot) + "/statistics/";
  SlotCounters c;
  c.tx_bytes = ReadCounter(base + "rx_bytes");
  c.rx_bytes = ReadCounter(base + "tx_bytes");
  return c;
}

asio::awaitable<void> NetworkManager::OnResolved(uint32_t client, std::vector<uint32_t> addrs,
                                                 uint32_t ttl) {
  int slot = SlotOfSandboxAddress(client);
  auto it = leased_.find(slot);
  // Only a policy consults the resolved set; `all` allows every address.
  if (it == leased_.end() || it->second.mode != NetMode::kPolicy || addrs.empty()) co_return;
  ttl = std::clamp(ttl, kResolvedTtlFloor, kResolvedTtlCeiling);
  if (auto st = co_await Nft(ResolvedScript(names_, slot, addrs, ttl)); !st.ok())
    spdlog::error("net slot={} resolved_set_failed err=\"{}\"", slot, st.error().message);
}

}  // namespace hutch::net
