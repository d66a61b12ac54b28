#include "net/network_manager.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <filesystem>
#include <fstream>
#include <spdlog/spdlog.h>
#include <sstream>

#include "common/subprocess.h"
#include "net/dns_policy.h"
#include "net/dns_proxy.h"
#include "net/sandbox_link.h"

namespace hutch::net {

namespace fs = std::filesystem;

namespace {

constexpr auto kToolTimeout = std::chrono::seconds(20);
// Addresses learned by DNS stay allowed at least this long (a TTL of 0
// would otherwise expire before the sandbox connects) and at most this.
constexpr uint32_t kResolvedTtlFloor = 30;
constexpr uint32_t kResolvedTtlCeiling = 3600;

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

NetworkManager::NetworkManager(asio::io_context& io, NetworkOptions opts, std::string ip, std::string nft)
    : io_(io), opts_(std::move(opts)), ip_bin_(std::move(ip)), nft_bin_(std::move(nft)) {
  names_.prefix = opts_.tag;
}

NetworkManager::~NetworkManager() {
  *alive_ = false;
  if (dns_) dns_->Stop();
}

asio::awaitable<Result<std::unique_ptr<NetworkManager>>> NetworkManager::Start(asio::io_context& io,
                                                                              NetworkOptions opts) {
  if (opts.tag.empty() || opts.tag.size() > 9)
    co_return MakeError(Code::kInvalidRequest, "network tag must be 1 to 9 characters");
  if (opts.pool.prefix < 16 || opts.pool.prefix > 28)
    co_return MakeError(Code::kInvalidRequest,
                        "network pool " + opts.pool.ToString() + " must be between a /16 and a /28");
  std::string ip = FindTool("ip"), nft = FindTool("nft");
  if (ip.empty()) co_return MakeError(Code::kUnavailable, "the ip tool (iproute2) is not installed");
  if (nft.empty()) co_return MakeError(Code::kUnavailable, "the nft tool (nftables) is not installed");
  // Sandboxes reach the world through the host: routing between
  // interfaces must be on. (A host-wide setting, left on at exit: other
  // software may rely on it too.)
  {
    std::ofstream fwd("/proc/sys/net/ipv4/ip_forward");
    fwd << "1\n";
    fwd.flush();
    if (!fwd) co_return MakeError(Code::kUnavailable, "cannot enable IPv4 forwarding (/proc/sys/net/ipv4/ip_forward)");
  }
  std::error_code ec;
  fs::create_directories(opts.netns_dir, ec);
  auto upstream = opts.dns_upstream ? opts.dns_upstream : HostResolver();
  std::unique_ptr<NetworkManager> m(new NetworkManager(io, std::move(opts), ip, nft));
  // One transaction: the old table (a crashed run's) goes and the new base
  // chains come; no instant without filtering.
  std::string script = "add table inet " + m->names_.table() + "\n" + DeleteTableScript(m->names_) +
                       BaseTableScript(m->names_, m->opts_.pool, m->opts_.dns_port);
  if (auto st = co_await m->Nft(script); !st.ok()) co_return st.error().Context("install nftables table");

  DnsProxyOptions dopts;
  if (upstream) dopts.upstream = *upstream;
  else spdlog::warn("net no_dns_upstream (no IPv4 nameserver in /etc/resolv.conf): allowed names get SERVFAIL");
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
      [self, alive](const asio::ip::address& client, const std::string&, std::vector<asio::ip::address_v4> addrs,
                    uint32_t ttl) -> asio::awaitable<void> {
        if (alive.expired() || !client.is_v4()) co_return;
        std::vector<uint32_t> a;
        for (const auto& x : addrs) a.push_back(x.to_uint());
        co_await self->OnResolved(client.to_v4().to_uint(), std::move(a), ttl);
      });
  spdlog::info("net started pool={} table={} dns_upstream={}", m->opts_.pool.ToString(), m->names_.table(),
               upstream ? upstream->address().to_string() : std::string("none"));
  co_return m;
}

std::string NetworkManager::NetnsName(int slot) const { return "hutch-" + opts_.tag + "-" + std::to_string(slot); }

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
  Error last = MakeError(Code::kCapacityExhausted,
                         "every subnet of the network pool " + opts_.pool.ToString() + " is in use");
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

asio::awaitable<Status> NetworkManager::IpBatch(const std::string& netns, const std::string& script) {
  std::vector<std::string> argv = {ip_bin_};
  if (!netns.empty()) {
    argv.push_back("-n");
    argv.push_back(netns);
  }
  argv.push_back("-batch");
  argv.push_back("-");
  co_return co_await RunToolWithInput(argv, &script, kToolTimeout);
}

std::string NetworkManager::HostSideScript(int slot) const {
  const std::string ns = NetnsName(slot), ifname = names_.host_if(slot);
  const std::string gw = Ipv4ToString(SlotBase(slot) + 1);
  return "netns add " + ns + "\n" + "link add " + ifname + " type veth peer name eth0 netns " + ns + "\n" +
         "addr add " + gw + "/30 dev " + ifname + "\n" + "link set " + ifname + " up\n";
}

Status NetworkManager::FinishSlot(int slot) {
  SandboxLinkConfig c;
  c.netns_path = opts_.netns_dir + "/" + NetnsName(slot);
  c.address = SlotBase(slot) + 2;
  c.gateway = SlotBase(slot) + 1;
  if (auto st = ConfigureSandboxLink(c); !st.ok()) return st;
  if (dns_) {
    const std::string gw = Ipv4ToString(c.gateway);
    auto port = dns_->AddListener(asio::ip::make_address(gw), opts_.dns_port);
    if (!port.ok()) return port.error().Context("DNS listener on " + gw);
  }
  return Status{};
}

asio::awaitable<Status> NetworkManager::MakeSlot(int slot) {
  auto st = co_await IpBatch("", HostSideScript(slot));
  if (st.ok()) st = FinishSlot(slot);
  if (!st.ok()) {
    co_await RemoveSlot(slot);
    co_return st.error().Context("prepare network slot " + std::to_string(slot));
  }
  co_return Status{};
}

asio::awaitable<std::vector<int>> NetworkManager::MakeWarmBatch(int count) {
  // One ip process for every slot's host side and one nft transaction for
  // all their mode-`all` rules: each tool run costs ≈ 10–25 ms of process
  // start and netlink cache here, whatever it does, so a burst of creates
  // drains the pool slower than one-slot-per-run refills it.
  std::vector<int> batch;
  for (int i = 0; i < count; ++i) {
    auto s = FreeSlot();
    if (!s) break;
    making_.insert(*s);
    batch.push_back(*s);
  }
  std::vector<int> made;
  if (batch.empty()) co_return made;
  std::string host;
  for (int s : batch) host += HostSideScript(s);
  auto st = co_await IpBatch("", host);
  if (!st.ok()) {
    // Some slot's names or addresses were taken (another server sharing
    // the pool?): undo all, and let the one-at-a-time path find out which.
    spdlog::warn("net warm_batch_failed slots={} err=\"{}\"", batch.size(), st.error().message);
    for (int s : batch) co_await RemoveSlot(s);
    for (int s : batch) making_.erase(s);
    co_return made;
  }
  for (int s : batch) {
    if (auto f = FinishSlot(s); !f.ok()) {
      spdlog::warn("net slot={} unusable, trying another err=\"{}\"", s, f.error().message);
      co_await RemoveSlot(s);
      making_.erase(s);
      foreign_.insert(s);
      continue;
    }
    made.push_back(s);
  }
  if (!made.empty()) {
    NetworkPolicy all;
    all.mode = NetMode::kAll;
    std::string rules;
    for (int s : made) rules += SlotPolicyScript(names_, s, all, true);
    if (auto r = co_await Nft(rules); r.ok()) warm_all_.insert(made.begin(), made.end());
    else spdlog::warn("net warm_policy_failed slots={} err=\"{}\"", made.size(), r.error().message);
  }
  for (int s : made) making_.erase(s);
  co_return made;
}

asio::awaitable<void> NetworkManager::RemoveSlot(int slot) {
  warm_all_.erase(slot);
  const std::string gw = Ipv4ToString(SlotBase(slot) + 1);
  if (dns_) dns_->RemoveListener(asio::ip::make_address(gw));
  // Each step on its own: whatever is already gone must not keep the rest
  // from going. Deleting the host end removes its peer at once, even while
  // some process still holds the namespace.
  auto st = co_await Nft(SlotRemoveScript(names_, slot));
  if (!st.ok()) {
    for (const auto& c : SlotRemoveCommands(names_, slot)) (void)co_await Nft(c + "\n");
  }
  // The veth and the namespace in one ip run (-force: a missing one does
  // not stop the other).
  std::string ip;
  if (fs::exists("/sys/class/net/" + names_.host_if(slot))) ip += "link del " + names_.host_if(slot) + "\n";
  if (fs::exists(opts_.netns_dir + "/" + NetnsName(slot))) ip += "netns del " + NetnsName(slot) + "\n";
  if (!ip.empty()) {
    std::vector<std::string> argv = {ip_bin_, "-force", "-batch", "-"};
    if (auto d = co_await RunToolWithInput(argv, &ip, kToolTimeout); !d.ok())
      spdlog::error("net slot={} remove_failed err=\"{}\"", slot, d.error().message);
  }
}

void NetworkManager::RefillWarm() {
  if (refilling_ || stopped_) return;
  // Refilled in batches: only once the pool is down to half, then back to
  // full, so each tool run serves several slots (see MakeWarmBatch).
  if (static_cast<int>(warm_.size() + making_.size()) > opts_.warm / 2 && !warm_.empty()) return;
  refilling_ = true;
  std::weak_ptr<bool> alive = alive_;
  asio::co_spawn(io_, [this, alive]() -> asio::awaitable<void> {
    while (!alive.expired() && !stopped_) {
      const int need = opts_.warm - static_cast<int>(warm_.size() + making_.size());
      if (need <= 0) break;
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
  }, asio::detached);
}

asio::awaitable<Result<NetLease>> NetworkManager::Acquire(const NetworkPolicy& policy) {
  if (stopped_) co_return MakeError(Code::kUnavailable, "networking is shutting down");
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
  const bool ready = warm_all_.erase(slot) > 0 && policy.mode == NetMode::kAll;
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
  if (it == leased_.end()) co_return MakeError(Code::kInternal, "network slot " + std::to_string(slot) + " is not leased");
  if (auto st = co_await Nft(SlotPolicyScript(names_, slot, policy, true)); !st.ok())
    co_return st.error().Context("apply network policy");
  // Looked up again: the map may have changed while nft ran.
  if (auto again = leased_.find(slot); again != leased_.end()) again->second = policy;
  co_return Status{};
}

asio::awaitable<void> NetworkManager::Release(int slot) {
  if (!leased_.erase(slot)) co_return;
  co_await RemoveSlot(slot);
}

asio::awaitable<Result<NetLease>> NetworkManager::Adopt(int slot, const NetworkPolicy& policy) {
  if (slot < 0 || slot >= max_slots()) co_return MakeError(Code::kInternal, "network slot out of the pool");
  NetLease l = LeaseOf(slot);
  if (!fs::exists(l.netns_path) || !fs::exists("/sys/class/net/" + names_.host_if(slot)))
    co_return MakeError(Code::kNotFound, "network namespace of slot " + std::to_string(slot) + " is gone");
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
    if (rest.empty() || rest.size() > 6 || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(rest);
  };
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(opts_.netns_dir, ec))
    if (int s = slot_of(e.path().filename().string(), ns_prefix); s >= 0 && !leased_.count(s)) leftover.insert(s);
  for (const auto& e : fs::directory_iterator("/sys/class/net", ec))
    if (int s = slot_of(e.path().filename().string(), if_prefix); s >= 0 && !leased_.count(s)) leftover.insert(s);
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
  if (leased_.empty()) (void)co_await Nft("add table inet " + names_.table() + "\n" + DeleteTableScript(names_));
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

asio::awaitable<void> NetworkManager::OnResolved(uint32_t client, std::vector<uint32_t> addrs, uint32_t ttl) {
  int slot = SlotOfSandboxAddress(client);
  auto it = leased_.find(slot);
  // Only a policy consults the resolved set; `all` allows every address.
  if (it == leased_.end() || it->second.mode != NetMode::kPolicy || addrs.empty()) co_return;
  ttl = std::clamp(ttl, kResolvedTtlFloor, kResolvedTtlCeiling);
  if (auto st = co_await Nft(ResolvedScript(names_, slot, addrs, ttl)); !st.ok())
    spdlog::error("net slot={} resolved_set_failed err=\"{}\"", slot, st.error().message);
}

}  // namespace hutch::net
