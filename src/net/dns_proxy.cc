#include "net/dns_proxy.h"

#include <fcntl.h>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <list>
#include <map>
#include <random>

#include "common/rate_limiter.h"
#include "net/dns_message.h"

namespace hutch::net {

namespace {

using asio::ip::tcp;
using asio::ip::udp;
using Clock = std::chrono::steady_clock;

// asio opens sockets without O_CLOEXEC; hutchd forks sandbox helpers.
void SetCloexec(int fd) {
  int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// Cancels the socket's pending operations when `at` passes. Callers also
// check Expired() before starting each operation: the timer may fire
// between two operations, when there is nothing to cancel.
template <typename Socket>
class Deadline {
 public:
  Deadline(asio::io_context& io, std::shared_ptr<Socket> sock, Clock::time_point at)
      : at_(at), timer_(std::make_shared<asio::steady_timer>(io)) {
    timer_->expires_at(at);
    timer_->async_wait([sock](boost::system::error_code ec) {
      if (!ec) {
        boost::system::error_code ignored;
        sock->cancel(ignored);
      }
    });
  }
  ~Deadline() { timer_->cancel(); }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  bool Expired() const { return Clock::now() >= at_; }

 private:
  Clock::time_point at_;
  std::shared_ptr<asio::steady_timer> timer_;
};

std::vector<uint8_t> TcpFrame(const std::vector<uint8_t>& msg) {
  std::vector<uint8_t> f;
  f.reserve(msg.size() + 2);
  f.push_back(static_cast<uint8_t>(msg.size() >> 8));
  f.push_back(static_cast<uint8_t>(msg.size() & 0xff));
  f.insert(f.end(), msg.begin(), msg.end());
  return f;
}

}  // namespace

struct Listener {
  Listener(asio::io_context& io) : udp_sock(io), acceptor(io) {}
  udp::socket udp_sock;
  tcp::acceptor acceptor;
  bool closed = false;
  std::list<std::weak_ptr<tcp::socket>> sessions;  // closed with the listener
};

struct DnsProxy::Core : std::enable_shared_from_this<DnsProxy::Core> {
  Core(asio::io_context& io, DnsProxyOptions o, DnsPolicyLookup p, DnsResolvedCallback r)
      : io(io),
        opts(std::move(o)),
        policy(std::move(p)),
        on_resolved(std::move(r)),
        rng(std::random_device{}()),
        query_rate(opts.queries_per_second, 2 * opts.queries_per_second) {}

  asio::io_context& io;
  DnsProxyOptions opts;
  DnsPolicyLookup policy;
  DnsResolvedCallback on_resolved;
  bool stopped = false;
  DnsProxyStats stats;
  std::map<asio::ip::address, std::shared_ptr<Listener>> listeners;
  std::map<asio::ip::address, size_t> inflight;
  size_t inflight_total = 0;
  std::map<asio::ip::address, size_t> tcp_conns;
  std::mt19937 rng;
  RateLimiter query_rate;  // per client address

  DnsDecision Decide(const asio::ip::address& client, std::span<const uint8_t> msg);
  bool TryAcquire(const asio::ip::address& client);
  void Release(const asio::ip::address& client);
  uint16_t NewId() { return static_cast<uint16_t>(rng()); }
};

namespace {

using CorePtr = std::shared_ptr<DnsProxy::Core>;

// Holds one in-flight slot of a client for its lifetime.
class InflightSlot {
 public:
  InflightSlot(CorePtr core, asio::ip::address client) : core_(std::move(core)), client_(client) {}
  ~InflightSlot() { core_->Release(client_); }
  InflightSlot(const InflightSlot&) = delete;
  InflightSlot& operator=(const InflightSlot&) = delete;

 private:
  CorePtr core_;
  asio::ip::address client_;
};

asio::awaitable<std::optional<DnsUpstreamAnswer>> ExchangeUdp(CorePtr self, const DnsQuery& q,
                                                              Clock::time_point deadline,
                                                              bool for_udp) {
  uint16_t id = self->NewId();
  std::vector<uint8_t> wire = BuildUpstreamQuery(q, id);
  if (wire.empty()) co_return std::nullopt;
  auto sock = std::make_shared<udp::socket>(self->io);
  boost::system::error_code ec;
  // A connected socket on a fresh random port: only the upstream's address
  // can answer, and the id plus the port make a blind spoof improbable.
  sock->open(self->opts.upstream.protocol(), ec);
  if (ec) co_return std::nullopt;
  SetCloexec(sock->native_handle());
  sock->connect(self->opts.upstream, ec);
  if (ec) co_return std::nullopt;
  Deadline<udp::socket> dl(self->io, sock, deadline);
  co_await sock->async_send(asio::buffer(wire), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  std::vector<uint8_t> buf(kDnsMaxMessage);
  while (!dl.Expired()) {
    size_t n = co_await sock->async_receive(asio::buffer(buf),
                                            asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return std::nullopt;  // timeout (cancelled) or ICMP unreachable
    auto answer = ProcessUpstreamReply(q, id, std::span<const uint8_t>(buf.data(), n), for_udp);
    if (answer) co_return answer;
    // Not an answer to this query: keep waiting for the real one.
  }
  co_return std::nullopt;
}

asio::awaitable<std::optional<DnsUpstreamAnswer>> ExchangeTcp(CorePtr self, const DnsQuery& q,
                                                              Clock::time_point deadline,
                                                              bool for_udp) {
  uint16_t id = self->NewId();
  std::vector<uint8_t> wire = BuildUpstreamQuery(q, id);
  if (wire.empty()) co_return std::nullopt;
  auto sock = std::make_shared<tcp::socket>(self->io);
  boost::system::error_code ec;
  tcp::endpoint ep(self->opts.upstream.address(), self->opts.upstream.port());
  sock->open(ep.protocol(), ec);
  if (ec) co_return std::nullopt;
  SetCloexec(sock->native_handle());
  Deadline<tcp::socket> dl(self->io, sock, deadline);
  co_await sock->async_connect(ep, asio::redirect_error(asio::use_awaitable, ec));
  if (ec || dl.Expired()) co_return std::nullopt;
  std::vector<uint8_t> frame = TcpFrame(wire);
  co_await asio::async_write(*sock, asio::buffer(frame),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec || dl.Expired()) co_return std::nullopt;
  uint8_t len[2];
  co_await asio::async_read(*sock, asio::buffer(len),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec || dl.Expired()) co_return std::nullopt;
  size_t n = (size_t{len[0]} << 8) | len[1];
  std::vector<uint8_t> buf(n);
  co_await asio::async_read(*sock, asio::buffer(buf),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  auto answer = ProcessUpstreamReply(q, id, buf, for_udp);
  if (answer && answer->upstream_truncated) co_return std::nullopt;  // TC over TCP: broken upstream
  co_return answer;
}

// Asks upstream, records the addresses, and returns the client's answer
// (SERVFAIL when upstream failed or timed out).
asio::awaitable<std::vector<uint8_t>> Forward(CorePtr self, asio::ip::address client, DnsQuery q,
                                              bool for_udp) {
  Clock::time_point deadline = Clock::now() + self->opts.upstream_timeout;
  auto answer = co_await ExchangeUdp(self, q, deadline, for_udp);
  if (answer && answer->upstream_truncated)
    answer = co_await ExchangeTcp(self, q, deadline, for_udp);
  if (!answer) {
    self->stats.upstream_failures++;
    spdlog::debug("dns upstream failed client={} name={}", client.to_string(), q.name);
    co_return BuildDnsReply(q, kRcodeServFail);
  }
  // A local copy: a coroutine lambda's captures live in the function
  // object, which must outlive the call even if Stop() clears ours.
  DnsResolvedCallback cb = self->on_resolved;
  if (cb && !self->stopped && !answer->addrs.empty()) {
    co_await cb(client, q.name, std::move(answer->addrs), answer->ttl);
  }
  co_return std::move(answer->reply);
}

asio::awaitable<void> UdpForward(CorePtr self, std::shared_ptr<Listener> l, udp::endpoint from,
                                 DnsQuery q) {
  InflightSlot slot(self, from.address());
  std::vector<uint8_t> reply = co_await Forward(self, from.address(), std::move(q), true);
  if (reply.empty() || l->closed) co_return;
  boost::system::error_code ec;
  l->udp_sock.send_to(asio::buffer(reply), from, 0, ec);  // non-blocking: a full buffer drops it
}

asio::awaitable<void> UdpLoop(CorePtr self, std::shared_ptr<Listener> l) {
  std::vector<uint8_t> buf(kDnsMaxQuery + 1);
  while (!l->closed && !self->stopped) {
    udp::endpoint from;
    boost::system::error_code ec;
    size_t n = co_await l->udp_sock.async_receive_from(
        asio::buffer(buf), from, asio::redirect_error(asio::use_awaitable, ec));
    if (l->closed || self->stopped) co_return;
    if (ec) continue;  // e.g. ICMP errors of earlier sends
    // A datagram larger than the buffer arrives cut to kDnsMaxQuery + 1
    // bytes, which DecideDnsQuery drops as oversized.
    DnsDecision d = self->Decide(from.address(), std::span<const uint8_t>(buf.data(), n));
    if (d.kind == DnsDecision::kReply) {
      l->udp_sock.send_to(asio::buffer(d.reply), from, 0, ec);
    } else if (d.kind == DnsDecision::kForward) {
      if (!self->TryAcquire(from.address())) continue;
      asio::co_spawn(self->io, UdpForward(self, l, from, std::move(*d.query)), asio::detached);
    }
  }
}

asio::awaitable<void> TcpSession(CorePtr self, std::shared_ptr<Listener> l,
                                 std::shared_ptr<tcp::socket> sock, asio::ip::address client) {
  struct ConnCount {
    CorePtr self;
    asio::ip::address client;
    ~ConnCount() {
      auto it = self->tcp_conns.find(client);
      if (it != self->tcp_conns.end() && --it->second == 0) self->tcp_conns.erase(it);
    }
  } count{self, client};
  boost::system::error_code ec;
  while (!l->closed && !self->stopped) {
    // The idle limit covers reading the next query; answering has its own
    // (upstream) timeout.
    std::vector<uint8_t> msg;
    {
      Deadline<tcp::socket> dl(self->io, sock, Clock::now() + self->opts.tcp_idle);
      uint8_t len[2];
      co_await asio::async_read(*sock, asio::buffer(len),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec || dl.Expired()) break;
      size_t n = (size_t{len[0]} << 8) | len[1];
      if (n == 0 || n > kDnsMaxQuery) break;
      msg.resize(n);
      co_await asio::async_read(*sock, asio::buffer(msg),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec || dl.Expired()) break;
    }
    if (l->closed || self->stopped) break;
    DnsDecision d = self->Decide(client, msg);
    std::vector<uint8_t> reply;
    if (d.kind == DnsDecision::kDrop) break;  // garbage on a stream: hang up
    if (d.kind == DnsDecision::kReply) {
      reply = std::move(d.reply);
    } else {
      if (!self->TryAcquire(client)) break;
      InflightSlot slot(self, client);
      reply = co_await Forward(self, client, std::move(*d.query), false);
    }
    if (l->closed || self->stopped) break;
    std::vector<uint8_t> frame = TcpFrame(reply);
    Deadline<tcp::socket> dl(self->io, sock, Clock::now() + self->opts.tcp_idle);
    co_await asio::async_write(*sock, asio::buffer(frame),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  sock->close(ec);
}

asio::awaitable<void> AcceptLoop(CorePtr self, std::shared_ptr<Listener> l) {
  while (!l->closed && !self->stopped) {
    boost::system::error_code ec;
    tcp::socket s =
        co_await l->acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (l->closed || self->stopped) co_return;
    if (ec) {
      // EMFILE and friends: back off instead of spinning.
      asio::steady_timer t(self->io);
      t.expires_after(std::chrono::milliseconds(50));
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    SetCloexec(s.native_handle());
    auto remote = s.remote_endpoint(ec);
    if (ec) continue;
    size_t& conns = self->tcp_conns[remote.address()];
    if (conns >= self->opts.max_tcp_per_client) {
      self->stats.dropped++;
      continue;  // `s` closes here
    }
    conns++;
    auto sock = std::make_shared<tcp::socket>(std::move(s));
    l->sessions.remove_if([](const std::weak_ptr<tcp::socket>& w) { return w.expired(); });
    l->sessions.push_back(sock);
    asio::co_spawn(self->io, TcpSession(self, l, sock, remote.address()), asio::detached);
  }
}

void CloseListener(Listener& l) {
  l.closed = true;
  boost::system::error_code ec;
  l.udp_sock.close(ec);
  l.acceptor.close(ec);
  for (auto& w : l.sessions) {
    if (auto s = w.lock()) s->close(ec);
  }
  l.sessions.clear();
}

}  // namespace

DnsDecision DnsProxy::Core::Decide(const asio::ip::address& client, std::span<const uint8_t> msg) {
  stats.queries++;
  // A client over its query rate is not answered at all (as for the other
  // caps): an answer would only feed the flood.
  const std::string key = client.to_string();
  if (!query_rate.Take(query_rate.KeyId(key), RateLimiter::Clock::now()).allowed) {
    stats.dropped++;
    stats.rate_limited++;
    return DnsDecision{};
  }
  std::optional<DnsPolicy> p;
  if (policy) p = policy(client);
  DnsDecision d = DecideDnsQuery(msg, p ? &*p : nullptr);
  std::string_view reason = d.reason;
  if (d.kind == DnsDecision::kDrop) {
    stats.dropped++;
  } else if (d.kind == DnsDecision::kForward) {
    // counted in TryAcquire, once a slot is free
  } else if (reason == "unknown_client") {
    stats.refused++;
  } else if (reason == "denied") {
    stats.denied++;
    spdlog::debug("dns denied client={}", client.to_string());
  } else {
    stats.answered_here++;
  }
  return d;
}

bool DnsProxy::Core::TryAcquire(const asio::ip::address& client) {
  size_t& n = inflight[client];
  if (n >= opts.max_inflight_per_client || inflight_total >= opts.max_inflight_total) {
    if (n == 0) inflight.erase(client);
    stats.dropped++;
    return false;
  }
  n++;
  inflight_total++;
  stats.forwarded++;
  return true;
}

void DnsProxy::Core::Release(const asio::ip::address& client) {
  auto it = inflight.find(client);
  if (it == inflight.end()) return;
  inflight_total--;
  if (--it->second == 0) inflight.erase(it);
}

DnsProxy::DnsProxy(asio::io_context& io, DnsProxyOptions options, DnsPolicyLookup policy,
                   DnsResolvedCallback on_resolved)
    : core_(std::make_shared<Core>(io, std::move(options), std::move(policy),
                                   std::move(on_resolved))) {}

DnsProxy::~DnsProxy() { Stop(); }

Result<uint16_t> DnsProxy::AddListener(const asio::ip::address& address, uint16_t port) {
  if (core_->stopped) return MakeError(Code::kUnavailable, "dns proxy stopped");
  if (core_->listeners.count(address)) {
    return MakeError(Code::kConflict, "dns proxy already listens on " + address.to_string());
  }
  // Port 0: the kernel picks the UDP port; TCP must get the same one, which
  // another socket may hold: try a few times.
  std::string last_error;
  for (int attempt = 0; attempt < (port == 0 ? 8 : 1); attempt++) {
    auto l = std::make_shared<Listener>(core_->io);
    boost::system::error_code ec;
    udp::endpoint uep(address, port);
    l->udp_sock.open(uep.protocol(), ec);
    if (!ec) {
      SetCloexec(l->udp_sock.native_handle());
      l->udp_sock.bind(uep, ec);
    }
    if (!ec) l->udp_sock.non_blocking(true, ec);
    if (ec) {
      last_error = "udp: " + ec.message();
      break;
    }
    uint16_t bound = l->udp_sock.local_endpoint(ec).port();
    tcp::endpoint tep(address, bound);
    l->acceptor.open(tep.protocol(), ec);
    if (!ec) {
      SetCloexec(l->acceptor.native_handle());
      l->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) l->acceptor.bind(tep, ec);
    if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      last_error = "tcp: " + ec.message();
      CloseListener(*l);
      continue;
    }
    core_->listeners[address] = l;
    asio::co_spawn(core_->io, UdpLoop(core_, l), asio::detached);
    asio::co_spawn(core_->io, AcceptLoop(core_, l), asio::detached);
    return bound;
  }
  return MakeError(Code::kUnavailable, "dns proxy listen on " + address.to_string() + ":" +
                                           std::to_string(port) + ": " + last_error);
}

void DnsProxy::RemoveListener(const asio::ip::address& address) {
  auto it = core_->listeners.find(address);
  if (it == core_->listeners.end()) return;
  CloseListener(*it->second);
  core_->listeners.erase(it);
}

void DnsProxy::SetUpstream(const asio::ip::udp::endpoint& upstream) {
  core_->opts.upstream = upstream;
}

void DnsProxy::Stop() {
  if (core_->stopped) return;
  core_->stopped = true;
  for (auto& [addr, l] : core_->listeners) CloseListener(*l);
  core_->listeners.clear();
  core_->policy = nullptr;
  core_->on_resolved = nullptr;
}

DnsProxyStats DnsProxy::stats() const { return core_->stats; }

}  // namespace hutch::net
