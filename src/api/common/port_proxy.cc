#include "api/common/port_proxy.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <algorithm>
#include <optional>
#include <spdlog/spdlog.h>

#include "common/netns_socket.h"

namespace hutch::api {

namespace {

using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kChunk = 64 * 1024;
// A response header from the sandbox's server beyond this is refused.
constexpr uint32_t kUpstreamHeaderLimit = 64 * 1024;
constexpr auto kWatchInterval = std::chrono::seconds(1);

// One relayed exchange, shared by the coroutines that move its bytes and
// by its watchdog. The stream pointers are valid until `finished`.
struct Relay {
  beast::tcp_stream* client = nullptr;
  beast::tcp_stream* up = nullptr;
  std::weak_ptr<Sandbox> sandbox;
  std::weak_ptr<Instance> instance;
  Clock::time_point last = Clock::now();
  bool finished = false;
  bool killed = false;

  void Touch() { last = Clock::now(); }
  // Ends the exchange from outside: the upstream is closed and the
  // client's pending operations are cancelled, so every coroutine of the
  // relay returns; the connection to the client is then closed.
  void Kill() {
    if (killed || finished) return;
    killed = true;
    boost::system::error_code ec;
    up->socket().shutdown(tcp::socket::shutdown_both, ec);
    up->socket().close(ec);
    client->socket().shutdown(tcp::socket::shutdown_both, ec);
    client->socket().cancel(ec);
  }
};

// Set once; Wait returns when it is set.
class Flag {
 public:
  explicit Flag(asio::any_io_executor ex) : timer_(ex) {}
  void Set() {
    set_ = true;
    timer_.cancel();
  }
  bool is_set() const { return set_; }
  asio::awaitable<void> Wait() {
    while (!set_) {
      timer_.expires_at(asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

// Cuts the relay when it is idle or its sandbox stopped. A proxied
// connection whose sandbox is deleted usually ends by itself (the
// server's process dies, its socket closes); this is the backstop.
asio::awaitable<void> Watchdog(std::shared_ptr<Relay> r, std::chrono::seconds idle) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!r->finished && !r->killed) {
    t.expires_after(kWatchInterval);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (r->finished || r->killed) break;
    auto sb = r->sandbox.lock();
    auto inst = r->instance.lock();
    const bool gone = !sb || !inst || sb->instance != inst || sb->deleting ||
                      sb->rec.status == SandboxStatus::kStopped || sb->rec.status == SandboxStatus::kFailed;
    if (gone || Clock::now() - r->last > idle) {
      r->Kill();
      break;
    }
    // Traffic through the proxy is use of the sandbox: the idle policy
    // must not pause a sandbox that is serving.
    sb->last_active = std::max(sb->last_active, r->last);
  }
}

bool HasToken(std::string_view list, std::string_view token) {
  for (auto t : http::token_list(beast::string_view(list.data(), list.size())))
    if (beast::iequals(t, beast::string_view(token.data(), token.size()))) return true;
  return false;
}

// Removes the hop-by-hop fields (RFC 9110 7.6.1): those the Connection
// field names and the fixed list. `keep_upgrade` keeps Upgrade for a 101.
template <class Fields>
void EraseHopByHop(Fields& f, bool keep_upgrade) {
  std::vector<std::string> named;
  for (auto t : http::token_list(f[http::field::connection])) named.emplace_back(t);
  for (const auto& n : named)
    if (!(keep_upgrade && beast::iequals(n, "upgrade"))) f.erase(n);
  for (auto fld : {http::field::connection, http::field::keep_alive, http::field::proxy_connection,
                   http::field::proxy_authorization, http::field::proxy_authenticate, http::field::te,
                   http::field::trailer, http::field::expect})
    f.erase(fld);
  if (!keep_upgrade) f.erase(http::field::upgrade);
}

// Copies bytes from `from` to `to` until EOF or an error; an orderly EOF
// is passed on as a half-close, an error ends the whole relay.
asio::awaitable<void> Pipe(std::shared_ptr<Relay> r, tcp::socket& from, tcp::socket& to) {
  std::vector<char> buf(kChunk);
  boost::system::error_code ec;
  for (;;) {
    size_t n = co_await from.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    r->Touch();
    co_await asio::async_write(to, asio::buffer(buf.data(), n), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    r->Touch();
  }
  if (ec == asio::error::eof) {
    boost::system::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
  } else {
    r->Kill();
  }
}

// Writes what the HTTP parsers read past the end of the header (the first
// bytes of the upgraded protocol) before the pipes take over.
asio::awaitable<bool> Flush(beast::flat_buffer& b, tcp::socket& to) {
  if (b.size() == 0) co_return true;
  boost::system::error_code ec;
  co_await asio::async_write(to, b.data(), asio::redirect_error(asio::use_awaitable, ec));
  b.consume(b.size());
  co_return !ec;
}

}  // namespace

Result<int> PortProxy::ParsePort(std::string_view s) {
  if (s.empty() || s.size() > 5 || s[0] == '0')
    return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return MakeError(Code::kInvalidRequest, "port must be a number from 1 to 65535");
  return v;
}

std::optional<PortProxy::PortHost> PortProxy::ParsePortHost(std::string_view host) {
  const size_t dot = host.find('.');
  if (dot == std::string_view::npos || dot + 1 >= host.size()) return std::nullopt;
  const std::string_view label = host.substr(0, dot);
  const size_t dash = label.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 5) return std::nullopt;
  PortHost out;
  out.port = std::string(label.substr(0, dash));
  for (char c : out.port)
    if (c < '0' || c > '9') return std::nullopt;
  for (char c : label.substr(dash + 1)) out.id.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // The id form of SandboxManager::Create ("sb_" + hex).
  if (out.id.size() <= 3 || out.id.size() > 64 || out.id.compare(0, 3, "sb_") != 0) return std::nullopt;
  for (size_t i = 3; i < out.id.size(); ++i) {
    const char c = out.id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return out;
}

asio::awaitable<void> PortProxy::Serve(HttpContext& ctx, ProxyRequest req) {
  auto ex = co_await asio::this_coro::executor;
  const std::string& id = req.sandbox_id;
  auto sbr = mgr_->GetRunning(id);
  if (!sbr.ok()) co_return co_await ctx.SendError(sbr.error());
  std::shared_ptr<Sandbox> sb = std::move(sbr).value();
  std::shared_ptr<Instance> inst = sb->instance;
  if (!inst) {
    Error e = MakeError(Code::kSandboxNotRunning, "sandbox " + id + " is not running");
    co_return co_await ctx.SendError(e);
  }
  if (open_[id] >= opts_.max_connections_per_sandbox) {
    Error e = MakeError(Code::kCapacityExhausted, "sandbox " + id + " already has " +
                                                      std::to_string(opts_.max_connections_per_sandbox) +
                                                      " proxied connections open");
    co_return co_await ctx.SendError(e);
  }
  // Counted from here until the relay ends, however it ends.
  ++open_[id];
  ++total_;
  struct Count {
    PortProxy* p;
    std::string id;
    ~Count() {
      --p->total_;
      if (--p->open_[id] <= 0) p->open_.erase(id);
    }
  } count{this, id};

  // The upstream socket, created inside the sandbox's network namespace.
  auto ns = inst->NetNamespace();
  if (!ns.ok()) {
    Error e = ns.error().Context("sandbox " + id);
    co_return co_await ctx.SendError(e);
  }
  auto fd = TcpSocketInNetns(ns->get());
  if (!fd.ok()) {
    Error e = fd.error().Context("sandbox " + id);
    co_return co_await ctx.SendError(e);
  }
  boost::system::error_code ec;
  tcp::socket raw(ex);
  raw.assign(tcp::v4(), fd->release(), ec);
  if (ec) {
    Error e = MakeError(Code::kInternal, "adopt proxy socket: " + ec.message());
    co_return co_await ctx.SendError(e);
  }
  beast::tcp_stream up(std::move(raw));
  up.expires_after(opts_.connect_timeout);
  const std::string addr = inst->PortAddress();
  const tcp::endpoint dest(asio::ip::make_address_v4(addr), static_cast<unsigned short>(req.port));
  co_await up.async_connect(dest, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    Error e = MakeError(Code::kPortUnreachable, "nothing accepts connections on port " + std::to_string(req.port) +
                                                    " in sandbox " + id + " (" + ec.message() + ")");
    co_return co_await ctx.SendError(e);
  }
  up.expires_never();
  up.socket().set_option(tcp::no_delay(true), ec);

  beast::tcp_stream& client = ctx.stream();
  client.expires_never();
  auto relay = std::make_shared<Relay>();
  relay->client = &client;
  relay->up = &up;
  relay->sandbox = sb;
  relay->instance = inst;
  sb.reset();
  inst.reset();
  asio::co_spawn(ex, Watchdog(relay, opts_.idle_timeout), asio::detached);
  // Whatever happens below, the watchdog stops touching the streams.
  struct Finish {
    Relay* r;
    ~Finish() { r->finished = true; }
  } finish{relay.get()};

  // --- the request, rewritten for the sandbox's server
  const bool is_head = ctx.method() == http::verb::head;
  const std::string expect = ctx.Header("Expect");
  http::request_parser<http::buffer_body> rp{std::move(ctx.parser())};
  rp.body_limit(std::numeric_limits<std::uint64_t>::max());
  auto& rq = rp.get();
  const bool upgrade = rq.count(http::field::upgrade) > 0 && HasToken(ctx.Header("Connection"), "upgrade");
  const std::string host = ctx.Header("Host");
  EraseHopByHop(rq.base(), upgrade);
  for (const auto& h : req.strip_headers) rq.erase(h);
  rq.target(req.target);
  rq.version(11);
  std::string peer;
  {
    auto ep = client.socket().remote_endpoint(ec);
    if (!ec) peer = ep.address().to_string();
  }
  if (!peer.empty()) {
    std::string xff = ctx.Header("X-Forwarded-For");
    rq.set("X-Forwarded-For", xff.empty() ? peer : xff + ", " + peer);
  }
  if (!host.empty()) rq.set("X-Forwarded-Host", host);
  if (ctx.Header("X-Forwarded-Proto").empty()) rq.set("X-Forwarded-Proto", "http");
  if (!req.forwarded_prefix.empty()) rq.set("X-Forwarded-Prefix", req.forwarded_prefix);
  // One upstream connection per request: nothing to pool or to reuse
  // wrongly across clients.
  rq.set(http::field::connection, upgrade ? "Upgrade" : "close");

  // Expect: 100-continue is answered here (it is hop-by-hop): the client
  // starts sending, and the body streams through as it comes.
  if (!rp.is_done() && expect.size() == 12 && beast::iequals(expect, "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, 11};
    co_await http::async_write(client, cont, asio::redirect_error(asio::use_awaitable, ec));
  }

  // The request (header + body) goes up in its own coroutine while this
  // one waits for the response: a server may answer before it read the
  // whole body, or stream its answer while reading (an echo).
  Flag req_done(ex);
  bool client_failed = false;
  std::vector<char> req_chunk(kChunk);
  auto pump = [&]() -> asio::awaitable<void> {
    http::request_serializer<http::buffer_body> sr{rq};
    boost::system::error_code pec;
    // The header goes first, before any body arrived: the server may act
    // on it alone (a long poll, an upgrade).
    co_await http::async_write_header(up, sr, asio::redirect_error(asio::use_awaitable, pec));
    while (!pec && !relay->killed) {
      if (!rp.is_done()) {
        rq.body().data = req_chunk.data();
        rq.body().size = req_chunk.size();
        // read_some: pass on what arrived; a full read would hold a
        // trickling body back until 64 KiB piled up.
        co_await http::async_read_some(client, ctx.buffer(), rp, asio::redirect_error(asio::use_awaitable, pec));
        if (pec == http::error::need_buffer) pec = {};
        if (pec) {
          client_failed = true;
          relay->Kill();
          break;
        }
        relay->Touch();
        rq.body().size = req_chunk.size() - rq.body().size;
        rq.body().data = req_chunk.data();
        rq.body().more = !rp.is_done();
      } else {
        rq.body().data = nullptr;
        rq.body().size = 0;
        rq.body().more = false;
      }
      co_await http::async_write(up, sr, asio::redirect_error(asio::use_awaitable, pec));
      if (pec == http::error::need_buffer) pec = {};
      // The server stopped reading (it may have answered already): the
      // response side decides what the client gets.
      if (pec) break;
      relay->Touch();
      if (rp.is_done() && sr.is_done()) break;
    }
    req_done.Set();
  };
  asio::co_spawn(ex, pump(), asio::detached);
  // Stops the request side if it is still going, and waits for it (it
  // uses this frame's objects).
  auto stop_pump = [&]() -> asio::awaitable<void> {
    if (!req_done.is_set()) {
      boost::system::error_code ig;
      // Nothing else is pending on either stream now.
      up.socket().cancel(ig);
      client.socket().cancel(ig);
    }
    co_await req_done.Wait();
  };

  // --- the response
  beast::flat_buffer ubuf;
  std::optional<http::response_parser<http::buffer_body>> pp;
  for (;;) {
    pp.emplace();
    pp->header_limit(kUpstreamHeaderLimit);
    pp->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (is_head) pp->skip(true);
    co_await http::async_read_header(up, ubuf, *pp, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    relay->Touch();
    const int st = pp->get().result_int();
    // Interim answers (103 Early Hints; 100 cannot come, Expect was not
    // forwarded) are dropped: the final one follows.
    if (st >= 100 && st < 200 && st != 101) continue;
    break;
  }
  if (ec || (pp->get().result_int() == 101 && !upgrade)) {
    const bool killed = relay->killed;
    co_await stop_pump();
    if (client_failed || killed) {
      ctx.MarkRelayed(499, false);
      co_return;
    }
    Error e = MakeError(Code::kPortUnreachable,
                        "the server on port " + std::to_string(req.port) + " in sandbox " + id +
                            (ec ? " closed the connection without an answer (" + ec.message() + ")"
                                : " switched protocols unasked"));
    ctx.CloseAfterResponse();
    co_return co_await ctx.SendError(e);
  }
  auto& rs = pp->get();
  const int status = rs.result_int();

  if (status == 101) {
    // --- an upgraded connection: the 101 goes to the client, then bytes
    // flow both ways until each side closed its half (or an error/the
    // watchdog ends it all).
    co_await stop_pump();
    if (relay->killed) {
      ctx.MarkRelayed(499, false);
      co_return;
    }
    http::response<http::empty_body> sw{http::status::switching_protocols, 11};
    sw.base() = rs.base();
    EraseHopByHop(sw.base(), true);
    sw.set(http::field::connection, "Upgrade");
    sw.set("X-Request-Id", ctx.request_id());
    ctx.MarkRelayed(101, false);
    co_await http::async_write(client, sw, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    if (!co_await Flush(ubuf, client.socket()) || !co_await Flush(ctx.buffer(), up.socket())) co_return;
    Flag down_done(ex);
    auto down = [&]() -> asio::awaitable<void> {
      co_await Pipe(relay, up.socket(), client.socket());
      down_done.Set();
    };
    asio::co_spawn(ex, down(), asio::detached);
    co_await Pipe(relay, client.socket(), up.socket());
    co_await down_done.Wait();
    co_return;
  }

  // --- a plain response, streamed to the client. The connection to the
  // client stays open for another request only if the request body was
  // all read by now and the client asked for it.
  EraseHopByHop(rs.base(), false);
  bool keep = ctx.keep_alive() && !client_failed && rp.is_done();
  if (!pp->is_done() && !rs.has_content_length() && !rs.chunked()) {
    // Delimited by the server closing: re-framed as chunks for the client.
    if (ctx.RequestHeader().version() == 11) rs.chunked(true);
    else keep = false;
  }
  rs.set(http::field::connection, keep ? "keep-alive" : "close");
  rs.set("X-Request-Id", ctx.request_id());
  ctx.MarkRelayed(status, keep);
  if (!keep) ctx.CloseAfterResponse();

  std::vector<char> res_chunk(kChunk);
  http::response_serializer<http::buffer_body> sr{rs};
  bool complete = false;
  if (is_head || status == 204 || status == 304) {
    // No body follows whatever the header says (a HEAD's Content-Length
    // describes the GET): the header is the whole response.
    co_await http::async_write_header(client, sr, asio::redirect_error(asio::use_awaitable, ec));
    complete = !ec;
  }
  while (!complete && !relay->killed) {
    if (!pp->is_done()) {
      rs.body().data = res_chunk.data();
      rs.body().size = res_chunk.size();
      // read_some, so event streams (SSE) and other trickles flow as they come.
      co_await http::async_read_some(up, ubuf, *pp, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;  // the server went away mid-body: the client sees a cut response
      relay->Touch();
      rs.body().size = res_chunk.size() - rs.body().size;
      rs.body().data = res_chunk.data();
      rs.body().more = !pp->is_done();
    } else {
      rs.body().data = nullptr;
      rs.body().size = 0;
      rs.body().more = false;
    }
    co_await http::async_write(client, sr, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) break;
    relay->Touch();
    if (pp->is_done() && sr.is_done()) {
      complete = true;
      break;
    }
  }
  co_await stop_pump();
  if (!complete || !rp.is_done() || client_failed) ctx.CloseAfterResponse();
}

}  // namespace hutch::api
