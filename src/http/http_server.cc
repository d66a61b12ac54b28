#include "http/http_server.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/clock.h"

namespace hutch::api {

namespace {
// Slowloris guard: a client gets this long to send a complete header.
constexpr auto kHeaderTimeout = std::chrono::seconds(30);
// Headers beyond this are refused (431) instead of buffered.
constexpr uint32_t kHeaderLimit = 64 * 1024;

// Counts a coroutine in a counter for as long as it runs.
class CountWhileAlive {
 public:
  explicit CountWhileAlive(size_t& n) : n_(n) { ++n_; }
  ~CountWhileAlive() { --n_; }
  CountWhileAlive(const CountWhileAlive&) = delete;
  CountWhileAlive& operator=(const CountWhileAlive&) = delete;

 private:
  size_t& n_;
};
}  // namespace

Result<asio::ip::tcp::endpoint> HttpServer::Listen(const std::string& addr_port, bool tls) {
  if (tls && !tls_ctx_)
    return MakeError(Code::kInvalidRequest, "TLS listener " + addr_port + " without a certificate");
  size_t colon = addr_port.rfind(':');
  if (colon == std::string::npos)
    return MakeError(Code::kInvalidRequest, "listen address must be ADDR:PORT");
  std::string host = addr_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec)
    return MakeError(Code::kInvalidRequest, "bad listen address '" + host + "': " + ec.message());
  int port = 0;
  try {
    port = std::stoi(addr_port.substr(colon + 1));
  } catch (...) {
    return MakeError(Code::kInvalidRequest, "bad listen port in '" + addr_port + "'");
  }
  if (port < 0 || port > 65535) return MakeError(Code::kInvalidRequest, "bad listen port");
  asio::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  auto l = std::make_unique<Listener>(Listener{asio::ip::tcp::acceptor(io_), tls});
  auto& acceptor = l->acceptor;
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return MakeError(Code::kUnavailable, "listen on " + addr_port + ": " + ec.message());
  auto bound = acceptor.local_endpoint(ec);
  if (ec) return MakeError(Code::kUnavailable, "listen on " + addr_port + ": " + ec.message());
  listeners_.push_back(std::move(l));
  return bound;
}

void HttpServer::Start() {
  for (auto& l : listeners_) {
    Listener* listener = l.get();
    asio::co_spawn(
        io_, [this, listener]() -> asio::awaitable<void> { co_await AcceptLoop(*listener); },
        asio::detached);
  }
}

void HttpServer::Stop() {
  boost::system::error_code ec;
  for (auto& l : listeners_) l->acceptor.close(ec);
}

asio::awaitable<void> HttpServer::AcceptLoop(Listener& l) {
  auto& acceptor = l.acceptor;
  while (acceptor.is_open()) {
    boost::system::error_code ec;
    auto sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      // EMFILE and friends: back off instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer t(io_);
      t.expires_after(std::chrono::milliseconds(50));
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    sock.set_option(asio::ip::tcp::no_delay(true), ec);
    const ConnectionBudget::Id id = Admit(sock);
    // The context of the moment: a renewal swaps tls_ctx_ for the
    // connections accepted after it.
    auto stream = l.tls ? std::make_unique<HttpStream>(std::move(sock), tls_ctx_)
                        : std::make_unique<HttpStream>(std::move(sock));
    if (id == 0) {
      // A flood of refusals must not take the fds the cap protects: past
      // a few hundred in flight, close at once.
      if (refusing_ >= 256) continue;
      asio::co_spawn(io_, Refuse(std::move(stream)), asio::detached);
      continue;
    }
    streams_[id] = stream.get();
    asio::co_spawn(io_, Session(id, std::move(stream)), asio::detached);
  }
}

ConnectionBudget::Id HttpServer::Admit(const asio::ip::tcp::socket& sock) {
  boost::system::error_code ec;
  const auto peer = sock.remote_endpoint(ec);
  // (A peer gone already still gets its turn; it fails at its first read.)
  const std::string source = ec ? std::string("unknown") : SourceKey(peer.address());
  auto admission = budget_.Admit(source);
  ApiMetrics& m = router_->metrics();
  for (const auto& [victim, why] : admission.evicted) {
    ++m.connections_evicted.With({EvictReasonName(why)});
    static size_t warned = 0;
    if (warned++ % 1000 == 0)
      spdlog::warn(
          "connection_evicted reason={} source={} open={} unauthenticated={} evicted_so_far={}",
          EvictReasonName(why), source, budget_.open(), budget_.unauthenticated(), warned);
    // Closing cancels whatever its session awaits; the session then ends
    // and its Closed() finds nothing left to remove.
    if (auto it = streams_.find(victim); it != streams_.end()) {
      it->second->close();
      streams_.erase(it);
    }
  }
  if (!admission.admitted) {
    ++m.connections_refused;
    UpdateGauges();
    return 0;
  }
  UpdateGauges();
  return admission.id;
}

void HttpServer::Authenticate(ConnectionBudget::Id id) {
  // (Every request of an authenticated connection says so again.)
  if (budget_.IsAuthenticated(id)) return;
  budget_.Authenticate(id);
  UpdateGauges();
}

void HttpServer::Closed(ConnectionBudget::Id id) {
  budget_.Remove(id);
  streams_.erase(id);
  UpdateGauges();
}

void HttpServer::UpdateGauges() {
  authenticated_gauge_.Set(static_cast<double>(budget_.open() - budget_.unauthenticated()));
  unauthenticated_gauge_.Set(static_cast<double>(budget_.unauthenticated()));
}

asio::awaitable<void> HttpServer::Refuse(std::unique_ptr<HttpStream> owned) {
  CountWhileAlive count(refusing_);
  HttpStream& stream = *owned;
  static size_t warned = 0;
  if (warned++ % 1000 == 0)
    spdlog::warn("connection_refused reason=max_connections open={} max={}", budget_.open(),
                 budget_.limits().max_connections);
  router_->CountMalformedRequest(503, Code::kCapacityExhausted);
  nlohmann::json j = {
      {"code", "capacity_exhausted"},
      {"message", "too many open connections (" + std::to_string(budget_.limits().max_connections) +
                      "); retry when some have closed"},
      {"request_id", "r_" + RandomHex(10)},
      {"retryable", true}};
  http::response<http::string_body> res{http::status::service_unavailable, 11};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::retry_after, "1");
  res.set(http::field::connection, "close");
  res.body() = j.dump() + "\n";
  res.prepare_payload();
  stream.expires_after(std::chrono::seconds(2));
  // (A TLS client can read the answer only after the handshake; it
  // counts in the same two seconds.)
  boost::system::error_code ec = co_await stream.Handshake();
  if (!ec) co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  // Read (and drop) what the client sent until it closes, for at most a
  // second: closing with its request unread would reset the connection,
  // and the client might lose the answer.
  stream.ShutdownSend();
  stream.expires_after(std::chrono::seconds(1));
  char sink[1024];
  while (!ec) {
    co_await stream.async_read_some(asio::buffer(sink),
                                    asio::redirect_error(asio::use_awaitable, ec));
  }
  stream.close();
}

asio::awaitable<void> HttpServer::Session(ConnectionBudget::Id id,
                                          std::unique_ptr<HttpStream> owned) {
  HttpStream& stream = *owned;
  beast::flat_buffer buf;
  bool first = true;
  // A TLS handshake is part of the first request's header: an
  // unauthenticated client's deadline for both counts from accept.
  const auto first_deadline = std::chrono::steady_clock::now() + unauth_first_header_;
  if (stream.is_tls()) {
    stream.expires_at(first_deadline);
    const boost::system::error_code hs = co_await stream.Handshake();
    if (hs) stream.close();
  }
  // (An evicted connection's socket is closed under it.)
  while (stream.socket().is_open()) {
    http::request_parser<http::empty_body> hp;
    hp.header_limit(kHeaderLimit);
    // Per-route limits are applied when the body is read. (Beast 1.74
    // mishandles body_limit(boost::none): it compares against an empty
    // optional and rejects every body.)
    hp.body_limit(std::numeric_limits<std::uint64_t>::max());
    boost::system::error_code ec;
    // Without a credential yet, short deadlines: a client that means to
    // send a request sends it at once, and a probe's keep-alive must not
    // hold a connection for long.
    if (budget_.IsAuthenticated(id)) stream.expires_after(kHeaderTimeout);
    else if (first) stream.expires_at(first_deadline);
    else stream.expires_after(unauth_idle_);
    first = false;
    co_await http::async_read_header(stream, buf, hp,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == http::error::header_limit || ec == http::error::bad_target ||
          ec == http::error::bad_method || ec == http::error::bad_version ||
          ec == http::error::bad_field || ec == http::error::bad_value ||
          ec == http::error::bad_line_ending || ec == http::error::bad_chunk ||
          ec == http::error::bad_content_length || ec == http::error::bad_transfer_encoding) {
        // Malformed or oversized header: a JSON answer, then close.
        bool too_big = ec == http::error::header_limit;
        router_->CountMalformedRequest(too_big ? 431 : 400,
                                       too_big ? Code::kHeadersTooLarge : Code::kInvalidRequest);
        nlohmann::json j = {{"code", too_big ? "headers_too_large" : "invalid_request"},
                            {"message", "malformed HTTP request: " + ec.message()},
                            {"request_id", "r_" + RandomHex(10)},
                            {"retryable", false}};
        http::response<http::string_body> res{
            too_big ? http::status::request_header_fields_too_large : http::status::bad_request,
            11};
        res.set(http::field::content_type, "application/json");
        res.set(http::field::connection, "close");
        res.body() = j.dump() + "\n";
        res.prepare_payload();
        stream.expires_after(std::chrono::seconds(5));
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      }
      break;
    }
    HttpContext ctx(stream, buf, hp);
    ctx.set_authenticated_observer([this, id] { Authenticate(id); });
    bool failed = false;
    try {
      co_await router_->Handle(ctx);
    } catch (const std::exception& e) {
      // A bug, not a client error: logged, answered 500 below.
      spdlog::error("handler exception path={} request_id={} what=\"{}\"", ctx.path(),
                    ctx.request_id(), e.what());
      failed = true;
    }
    if (failed) {
      if (ctx.responded()) break;
      co_await ctx.SendError(MakeError(Code::kInternal, "internal error"));
    }
    if (!ctx.keep_alive()) break;
  }
  stream.ShutdownSend();
  stream.close();
  Closed(id);
}

}  // namespace hutch::api
