#include "api/common/http_relay.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <optional>

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
  HttpStream* client = nullptr;
  beast::tcp_stream* up = nullptr;
  // Polled by the watchdog: true ends the exchange.
  std::function<bool()> gone;
  // Told when traffic last moved (the watchdog's period).
  std::function<void(Clock::time_point)> active;
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

// Cuts the relay when it is idle or its far end is gone (RelaySpec::gone).
// A proxied connection whose sandbox is deleted usually ends by itself
// (the server's process dies, its socket closes); this is the backstop.
asio::awaitable<void> Watchdog(std::shared_ptr<Relay> r, std::chrono::seconds idle) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!r->finished && !r->killed) {
    t.expires_after(kWatchInterval);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (r->finished || r->killed) break;
    if ((r->gone && r->gone()) || Clock::now() - r->last > idle) {
      r->Kill();
      break;
    }
    if (r->active) r->active(r->last);
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
                   http::field::proxy_authorization, http::field::proxy_authenticate,
                   http::field::te, http::field::trailer, http::field::expect})
    f.erase(fld);
  if (!keep_upgrade) f.erase(http::field::upgrade);
}

// Our half of a relayed connection is done (the byte pipe's half-close).
void ShutdownSend(tcp::socket& s) {
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
}
void ShutdownSend(HttpStream& s) { s.ShutdownSend(); }

// Copies bytes from `from` to `to` until EOF or an error; an orderly EOF
// is passed on as a half-close, an error ends the whole relay. Either
// side is a socket to the sandbox or the client's HttpStream (plain or
// TLS: a TLS client closing without close_notify is an orderly EOF too,
// as TCP's FIN is on a plain one).
template <class From, class To>
asio::awaitable<void> Pipe(std::shared_ptr<Relay> r, From& from, To& to) {
  std::vector<char> buf(kChunk);
  boost::system::error_code ec;
  for (;;) {
    size_t n = co_await from.async_read_some(asio::buffer(buf),
                                             asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    r->Touch();
    co_await asio::async_write(to, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    r->Touch();
  }
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) ShutdownSend(to);
  else r->Kill();
}

// Writes what the HTTP parsers read past the end of the header (the first
// bytes of the upgraded protocol) before the pipes take over.
template <class To>
asio::awaitable<bool> Flush(beast::flat_buffer& b, To& to) {
  if (b.size() == 0) co_return true;
  boost::system::error_code ec;
  co_await asio::async_write(to, b.data(), asio::redirect_error(asio::use_awaitable, ec));
  b.consume(b.size());
  co_return !ec;
}

// One relayed exchange between the client's connection (of `ctx`) and the
// upstream connection, step by step: the request rewritten for the
// sandbox's server and pumped up in its own coroutine, while the response
// comes down (a plain one streamed, or a 101 and then raw bytes both ways).
class Exchange {
 public:
  Exchange(HttpContext& ctx, beast::tcp_stream up, asio::any_io_executor ex)
      : ctx_(ctx),
        client_(ctx.stream()),
        up_(std::move(up)),
        ex_(ex),
        req_done_(ex),
        rp_(std::move(ctx.parser())) {
    is_head_ = ctx.method() == http::verb::head;
  }
  // Whatever happens, the watchdog stops touching the streams once the
  // exchange is over.
  ~Exchange() {
    if (relay_) relay_->finished = true;
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Starts the watchdog that cuts the exchange when it idles or its far
  // end is gone.
  void Watch(const RelaySpec& spec) {
    client_.expires_never();
    relay_ = std::make_shared<Relay>();
    relay_->client = &client_;
    relay_->up = &up_;
    relay_->gone = spec.gone;
    relay_->active = spec.active;
    asio::co_spawn(ex_, Watchdog(relay_, spec.idle_timeout), asio::detached);
  }

  // The request header as the sandbox's server gets it: hop-by-hop fields
  // and hutch's credentials out, the target rewritten, X-Forwarded-* in.
  void RewriteRequest(const RelaySpec& req) {
    rp_.body_limit(std::numeric_limits<std::uint64_t>::max());
    auto& rq = rp_.get();
    upgrade_ = rq.count(http::field::upgrade) > 0 && HasToken(ctx_.Header("Connection"), "upgrade");
    const std::string host = ctx_.Header("Host");
    EraseHopByHop(rq.base(), upgrade_);
    for (const auto& h : req.strip_headers) rq.erase(h);
    rq.target(req.target);
    rq.version(11);
    std::string peer;
    {
      boost::system::error_code ec;
      auto ep = client_.socket().remote_endpoint(ec);
      if (!ec) peer = ep.address().to_string();
    }
    if (!peer.empty()) {
      std::string xff = ctx_.Header("X-Forwarded-For");
      rq.set("X-Forwarded-For", xff.empty() ? peer : xff + ", " + peer);
    }
    if (!host.empty()) rq.set("X-Forwarded-Host", host);
    if (ctx_.Header("X-Forwarded-Proto").empty())
      rq.set("X-Forwarded-Proto", client_.is_tls() ? "https" : "http");
    if (!req.forwarded_prefix.empty()) rq.set("X-Forwarded-Prefix", req.forwarded_prefix);
    for (const auto& [name, value] : req.set_headers) rq.set(name, value);
    // One upstream connection per request: nothing to pool or to reuse
    // wrongly across clients.
    rq.set(http::field::connection, upgrade_ ? "Upgrade" : "close");
  }

  // Expect: 100-continue is answered here (it is hop-by-hop): the client
  // starts sending, and the body streams through as it comes.
  asio::awaitable<void> AnswerExpectContinue() {
    const std::string expect = ctx_.Header("Expect");
    if (rp_.is_done() || expect.size() != 12 || !beast::iequals(expect, "100-continue")) co_return;
    http::response<http::empty_body> cont{http::status::continue_, 11};
    boost::system::error_code ec;
    co_await http::async_write(client_, cont, asio::redirect_error(asio::use_awaitable, ec));
  }

  // The request (header + body) goes up in its own coroutine while the
  // response is awaited: a server may answer before it read the whole
  // body, or stream its answer while reading (an echo).
  void StartRequestPump() { asio::co_spawn(ex_, PumpRequest(), asio::detached); }

  // Reads the response header, skipping interim answers (103 Early Hints;
  // 100 cannot come, Expect was not forwarded): the final one follows.
  asio::awaitable<void> ReadResponseHeader() {
    for (;;) {
      pp_.emplace();
      pp_->header_limit(kUpstreamHeaderLimit);
      pp_->body_limit(std::numeric_limits<std::uint64_t>::max());
      if (is_head_) pp_->skip(true);
      co_await http::async_read_header(up_, ubuf_, *pp_,
                                       asio::redirect_error(asio::use_awaitable, read_ec_));
      if (read_ec_) co_return;
      relay_->Touch();
      const int st = pp_->get().result_int();
      if (st >= 100 && st < 200 && st != 101) continue;
      co_return;
    }
  }

  // No usable answer: the server closed without one, or switched
  // protocols unasked.
  bool ResponseUnusable() const { return read_ec_ || (status() == 101 && !upgrade_); }
  int status() const { return pp_->get().result_int(); }

  asio::awaitable<void> ReportUnusableResponse(const RelaySpec& req) {
    const bool killed = relay_->killed;
    co_await StopPump();
    if (client_failed_ || killed) {
      ctx_.MarkRelayed(499, false);
      co_return;
    }
    Error e = MakeError(
        req.unreachable_code,
        req.upstream_name +
            (read_ec_ ? " closed the connection without an answer (" + read_ec_.message() + ")"
                      : " switched protocols unasked"));
    ctx_.CloseAfterResponse();
    co_await ctx_.SendError(e);
  }

  // An upgraded connection: the 101 goes to the client, then bytes flow
  // both ways until each side closed its half (or an error or the
  // watchdog ends it all).
  asio::awaitable<void> RelayUpgrade() {
    co_await StopPump();
    if (relay_->killed) {
      ctx_.MarkRelayed(499, false);
      co_return;
    }
    http::response<http::empty_body> sw{http::status::switching_protocols, 11};
    sw.base() = pp_->get().base();
    EraseHopByHop(sw.base(), true);
    sw.set(http::field::connection, "Upgrade");
    sw.set("X-Request-Id", ctx_.request_id());
    ctx_.MarkRelayed(101, false);
    boost::system::error_code ec;
    co_await http::async_write(client_, sw, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    if (!co_await Flush(ubuf_, client_) || !co_await Flush(ctx_.buffer(), up_.socket())) co_return;
    Flag down_done(ex_);
    auto down = [&]() -> asio::awaitable<void> {
      co_await Pipe(relay_, up_.socket(), client_);
      down_done.Set();
    };
    asio::co_spawn(ex_, down(), asio::detached);
    co_await Pipe(relay_, client_, up_.socket());
    co_await down_done.Wait();
  }

  // A plain response, streamed to the client. The connection to the
  // client stays open for another request only if the request body was
  // all read by now and the client asked for it.
  asio::awaitable<void> RelayResponse() {
    auto& rs = pp_->get();
    const int st = rs.result_int();
    EraseHopByHop(rs.base(), false);
    bool keep = ctx_.keep_alive() && !client_failed_ && rp_.is_done();
    if (!pp_->is_done() && !rs.has_content_length() && !rs.chunked()) {
      // Delimited by the server closing: re-framed as chunks for the client.
      if (ctx_.RequestHeader().version() == 11) rs.chunked(true);
      else keep = false;
    }
    rs.set(http::field::connection, keep ? "keep-alive" : "close");
    rs.set("X-Request-Id", ctx_.request_id());
    ctx_.MarkRelayed(st, keep);
    if (!keep) ctx_.CloseAfterResponse();
    const bool complete = co_await StreamResponseBody(st);
    co_await StopPump();
    if (!complete || !rp_.is_done() || client_failed_) ctx_.CloseAfterResponse();
  }

 private:
  // The request pump: the header first, before any body arrived (the
  // server may act on it alone: a long poll, an upgrade), then the body
  // as it comes.
  asio::awaitable<void> PumpRequest() {
    auto& rq = rp_.get();
    http::request_serializer<http::buffer_body> sr{rq};
    boost::system::error_code pec;
    co_await http::async_write_header(up_, sr, asio::redirect_error(asio::use_awaitable, pec));
    while (!pec && !relay_->killed) {
      if (!rp_.is_done()) {
        rq.body().data = req_chunk_.data();
        rq.body().size = req_chunk_.size();
        // read_some: pass on what arrived; a full read would hold a
        // trickling body back until 64 KiB piled up.
        co_await http::async_read_some(client_, ctx_.buffer(), rp_,
                                       asio::redirect_error(asio::use_awaitable, pec));
        if (pec == http::error::need_buffer) pec = {};
        if (pec) {
          client_failed_ = true;
          relay_->Kill();
          break;
        }
        relay_->Touch();
        rq.body().size = req_chunk_.size() - rq.body().size;
        // Only framing consumed (a chunk header): nothing to send yet (an
        // empty buffer would end the chunked body upstream).
        if (rq.body().size == 0 && !rp_.is_done()) continue;
        rq.body().data = req_chunk_.data();
        rq.body().more = !rp_.is_done();
      } else {
        rq.body().data = nullptr;
        rq.body().size = 0;
        rq.body().more = false;
      }
      co_await http::async_write(up_, sr, asio::redirect_error(asio::use_awaitable, pec));
      if (pec == http::error::need_buffer) pec = {};
      // The server stopped reading (it may have answered already): the
      // response side decides what the client gets.
      if (pec) break;
      relay_->Touch();
      if (rp_.is_done() && sr.is_done()) break;
    }
    req_done_.Set();
  }

  // Stops the request pump if it is still going, and waits for it (it
  // uses this object).
  asio::awaitable<void> StopPump() {
    if (!req_done_.is_set()) {
      boost::system::error_code ig;
      // Nothing else is pending on either stream now.
      up_.socket().cancel(ig);
      client_.socket().cancel(ig);
    }
    co_await req_done_.Wait();
  }

  // The response body, chunk by chunk as it arrives (event streams and
  // other trickles flow as they come); true when all of it went out.
  asio::awaitable<bool> StreamResponseBody(int st) {
    auto& rs = pp_->get();
    std::vector<char> res_chunk(kChunk);
    http::response_serializer<http::buffer_body> sr{rs};
    boost::system::error_code ec;
    if (is_head_ || st == 204 || st == 304) {
      // No body follows whatever the header says (a HEAD's Content-Length
      // describes the GET): the header is the whole response.
      co_await http::async_write_header(client_, sr, asio::redirect_error(asio::use_awaitable, ec));
      co_return !ec;
    }
    while (!relay_->killed) {
      if (!pp_->is_done()) {
        rs.body().data = res_chunk.data();
        rs.body().size = res_chunk.size();
        co_await http::async_read_some(up_, ubuf_, *pp_,
                                       asio::redirect_error(asio::use_awaitable, ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) co_return false;  // the server went away mid-body: the client sees a cut response
        relay_->Touch();
        rs.body().size = res_chunk.size() - rs.body().size;
        // A read that consumed only framing (a chunk header) gave no body
        // bytes: an empty buffer with more to come would make the
        // serializer end a chunked body right here.
        if (rs.body().size == 0 && !pp_->is_done()) continue;
        rs.body().data = res_chunk.data();
        rs.body().more = !pp_->is_done();
      } else {
        rs.body().data = nullptr;
        rs.body().size = 0;
        rs.body().more = false;
      }
      co_await http::async_write(client_, sr, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) co_return false;
      relay_->Touch();
      if (pp_->is_done() && sr.is_done()) co_return true;
    }
    co_return false;
  }

  HttpContext& ctx_;
  HttpStream& client_;
  beast::tcp_stream up_;
  asio::any_io_executor ex_;
  std::shared_ptr<Relay> relay_;
  Flag req_done_;
  http::request_parser<http::buffer_body> rp_;
  bool is_head_ = false;
  bool upgrade_ = false;
  bool client_failed_ = false;
  std::vector<char> req_chunk_ = std::vector<char>(kChunk);
  beast::flat_buffer ubuf_;
  std::optional<http::response_parser<http::buffer_body>> pp_;
  boost::system::error_code read_ec_;
};

}  // namespace

asio::awaitable<void> RelayHttp(HttpContext& ctx, beast::tcp_stream up, const RelaySpec& spec) {
  auto ex = co_await asio::this_coro::executor;
  Exchange x(ctx, std::move(up), ex);
  x.Watch(spec);
  x.RewriteRequest(spec);
  co_await x.AnswerExpectContinue();
  x.StartRequestPump();
  co_await x.ReadResponseHeader();
  if (x.ResponseUnusable()) co_return co_await x.ReportUnusableResponse(spec);
  if (x.status() == 101) co_return co_await x.RelayUpgrade();
  co_await x.RelayResponse();
}

}  // namespace hutch::api
