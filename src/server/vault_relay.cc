#include "server/vault_relay.h"

#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <limits>

#include "common/netns_socket.h"
#include "net/dns_pattern.h"
#include "net/tls_sni.h"

namespace hutch::server {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kPeekMax = 16 * 1024 + 5;  // one TLS record
constexpr auto kHelloDeadline = std::chrono::seconds(10);
constexpr size_t kChunk = 16 * 1024;

Result<tcp::endpoint> OriginalDst(tcp::socket& s) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockopt(s.native_handle(), SOL_IP, SO_ORIGINAL_DST, &a, &len) != 0)
    return ErrnoError("SO_ORIGINAL_DST", errno);
  return tcp::endpoint(asio::ip::address_v4(ntohl(a.sin_addr.s_addr)), ntohs(a.sin_port));
}

// The server name of the ClientHello waiting on `s`, read without taking
// it off the socket; "" when there is none (or no TLS at all).
asio::awaitable<std::string> PeekServerName(tcp::socket& s) {
  std::string buf(kPeekMax, '\0');
  asio::steady_timer t(s.get_executor());
  const auto deadline = std::chrono::steady_clock::now() + kHelloDeadline;
  error_code ec;
  while (std::chrono::steady_clock::now() < deadline) {
    co_await s.async_wait(tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return "";
    const ssize_t n = recv(s.native_handle(), buf.data(), buf.size(), MSG_PEEK);
    if (n <= 0) co_return "";
    const auto peek = net::PeekSni(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (peek.kind != net::SniPeek::kNeedMore) co_return peek.name;
    if (static_cast<size_t>(n) == buf.size()) co_return "";
    // The rest of the hello is on its way: readable stays true, so wait.
    t.expires_after(std::chrono::milliseconds(5));
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return "";
}

// A connection to `dst` from the sandbox's namespace, marked so that the
// redirect there lets it pass (and the host's policy sees it as the
// sandbox's).
asio::awaitable<Result<tcp::socket>> ConnectUpstream(const VaultRelayEnv& env, tcp::endpoint dst) {
  auto fd = TcpSocketInNetns(env.netns->get());
  if (!fd.ok()) co_return fd.error();
  const uint32_t mark = kVaultUpstreamMark;
  if (setsockopt(fd->get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0)
    co_return ErrnoError("SO_MARK", errno);
  tcp::socket up(co_await asio::this_coro::executor);
  error_code ec;
  up.assign(tcp::v4(), fd->release(), ec);
  if (ec) co_return MakeError(Code::kInternal, "upstream socket: " + ec.message());
  co_await up.async_connect(dst, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return MakeError(Code::kUnavailable,
                        "connect " + dst.address().to_string() + ": " + ec.message());
  co_return std::move(up);
}

template <class From, class To>
asio::awaitable<void> Pipe(std::shared_ptr<From> from, std::shared_ptr<To> to) {
  std::vector<char> buf(kChunk);
  error_code ec;
  for (;;) {
    const size_t n = co_await from->async_read_some(asio::buffer(buf),
                                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(*to, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  error_code ignored;
  if (ec == asio::error::eof) {
    to->shutdown(tcp::socket::shutdown_send, ignored);
  } else {
    from->close(ignored);
    to->close(ignored);
  }
}

// Unbound: the bytes pass untouched both ways (TLS end to end).
asio::awaitable<void> Splice(tcp::socket client, tcp::socket up) {
  auto a = std::make_shared<tcp::socket>(std::move(client));
  auto b = std::make_shared<tcp::socket>(std::move(up));
  auto back = Pipe(b, a);
  asio::co_spawn(a->get_executor(), std::move(back), asio::detached);
  co_await Pipe(a, b);
}

// Adds the credentials of the first binding the request matches and its
// group (looked up now: a binding deleted a moment ago adds nothing).
template <class Fields>
void Inject(const VaultRelayEnv& env, const std::string& host, int port,
            http::request_header<Fields>& req) {
  const vault::Vault* v = env.book->Find(env.sandbox_id);
  if (!v) return;
  const std::string target(req.target());
  const auto q = target.find('?');
  vault::RequestFacts facts{"https", host, port, std::string(req.method_string()),
                            target.substr(0, q)};
  // The Host the request names must be the name the TLS session was
  // verified for: another name would take the credential elsewhere.
  std::string named(req[http::field::host]);
  if (auto colon = named.rfind(':'); colon != std::string::npos) named.resize(colon);
  if (auto n = net::NormalizeDomainName(named); !n || *n != host) return;
  std::string out = target;
  for (const auto& inj : vault::MatchRequest(*v, facts)) {
    if (inj.query) {
      out += (out.find('?') == std::string::npos ? "?" : "&") + inj.name + "=" + inj.value;
    } else {
      req.set(inj.name, inj.value);
    }
  }
  if (out != target) req.target(out);
}

// Relays one message from `in` to `out` as it arrives; `edit` may change
// the header before it is written. Returns whether the connection may
// carry another message, or the message's status (responses).
template <bool IsRequest, class Out, class In, class Edit>
asio::awaitable<Result<std::pair<bool, unsigned>>> RelayMessage(Out& out, In& in,
                                                                beast::flat_buffer& b,
                                                                bool skip_body, Edit edit) {
  http::parser<IsRequest, http::buffer_body> p;
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (skip_body) p.skip(true);
  error_code ec;
  co_await http::async_read_header(in, b, p, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, ec.message());
  edit(p.get());
  http::serializer<IsRequest, http::buffer_body> sr{p.get()};
  co_await http::async_write_header(out, sr, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, ec.message());
  std::vector<char> buf(kChunk);
  while (!p.is_done()) {
    p.get().body().data = buf.data();
    p.get().body().size = buf.size();
    // Whatever has arrived (not a full buffer): a streamed answer stays
    // streamed.
    co_await http::async_read_some(in, b, p, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return MakeError(Code::kUnavailable, ec.message());
    p.get().body().size = buf.size() - p.get().body().size;
    p.get().body().data = buf.data();
    p.get().body().more = !p.is_done();
    co_await http::async_write(out, sr, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return MakeError(Code::kUnavailable, ec.message());
  }
  if (!sr.is_done()) {
    p.get().body().data = nullptr;
    p.get().body().size = 0;
    p.get().body().more = false;
    co_await http::async_write(out, sr, asio::redirect_error(asio::use_awaitable, ec));
    if (ec && ec != http::error::need_buffer) co_return MakeError(Code::kUnavailable, ec.message());
  }
  unsigned status = 0;
  if constexpr (!IsRequest) status = p.get().result_int();
  co_return std::make_pair(p.keep_alive(), status);
}

template <class Stream>
asio::awaitable<void> SendBadGateway(Stream& s, const std::string& why) {
  http::response<http::string_body> res{http::status::bad_gateway, 11};
  res.set(http::field::content_type, "text/plain");
  res.set(http::field::connection, "close");
  res.body() = "hutch vault proxy: " + why + "\n";
  res.prepare_payload();
  error_code ec;
  co_await http::async_write(s, res, asio::redirect_error(asio::use_awaitable, ec));
}

// Bound: TLS to the sandbox with the sandbox CA's leaf for `host`, TLS to
// the real host verified for `host`, and HTTP/1.1 between them.
asio::awaitable<void> Interpose(tcp::socket client, tcp::socket up, std::string host, int port,
                                VaultRelayEnv env) {
  auto leaf = env.ca->ContextFor(host);
  if (!leaf.ok()) co_return;
  ssl::stream<tcp::socket> cs(std::move(client), **leaf);
  error_code ec;
  co_await cs.async_handshake(ssl::stream_base::server,
                              asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  ssl::stream<tcp::socket> us(std::move(up), *env.upstream);
  SSL_set_tlsext_host_name(us.native_handle(), host.c_str());
  us.set_verify_mode(ssl::verify_peer);
  us.set_verify_callback(ssl::host_name_verification(host));
  co_await us.async_handshake(ssl::stream_base::client,
                              asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::warn("sandbox={} vault_upstream_tls_failed host={} err=\"{}\"", env.sandbox_id, host,
                 ec.message());
    co_return co_await SendBadGateway(cs, "TLS to " + host + " failed: " + ec.message());
  }
  beast::flat_buffer cb, ub;
  for (;;) {
    bool head = false;
    auto edit_req = [&](http::request_header<>& h) {
      head = h.method() == http::verb::head;
      Inject(env, host, port, h);
    };
    auto req = co_await RelayMessage<true>(us, cs, cb, false, edit_req);
    if (!req.ok()) break;
    Result<std::pair<bool, unsigned>> res = MakeError(Code::kUnavailable, "no response");
    // Interim answers (100 Continue) come before the final one.
    do {
      auto keep_res = [](http::response_header<>&) {};
      res = co_await RelayMessage<false>(cs, us, ub, head, keep_res);
    } while (res.ok() && res->second / 100 == 1 && res->second != 101);
    if (!res.ok() || !req->first || !res->first || res->second == 101) break;
  }
  // No TLS shutdown: waiting for the sandbox's close_notify could wait
  // forever; closing the sockets ends both sides.
}

}  // namespace

asio::awaitable<void> ServeVaultConnection(tcp::socket client, VaultRelayEnv env) {
  auto dst = OriginalDst(client);
  // A connection made to the listener itself (no redirect) goes nowhere.
  if (!dst.ok() || dst->address().to_v4().is_loopback()) co_return;
  const std::string name = co_await PeekServerName(client);
  const int port = dst->port();
  const vault::Vault* v = env.book->Find(env.sandbox_id);
  auto host = net::NormalizeDomainName(name);
  const bool bound = v && host && !host->empty() && vault::HostIsBound(*v, "https", *host, port);
  auto up = co_await ConnectUpstream(env, *dst);
  if (!up.ok()) co_return;
  if (!bound) co_return co_await Splice(std::move(client), std::move(up).value());
  co_await Interpose(std::move(client), std::move(up).value(), *host, port, std::move(env));
}

}  // namespace hutch::server
