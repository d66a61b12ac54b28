// The connection to one HTTP client: plain TCP, or TLS over TCP. Every
// handler, relay and WebSocket reads and writes through this one type, so
// the HTTP and HTTPS listeners serve the same code and nothing forks on
// the transport. Deadlines (expires_after) and the peer's socket are
// those of the TCP connection underneath either way, so the connection
// budget, header timeouts and per-address limits count TLS clients the
// same as plain ones.
//
// It is an asio AsyncStream (get_executor, async_read_some,
// async_write_some): Beast's http::async_read/async_write and
// websocket::stream<HttpStream&> take it as they take a tcp_stream.
// Lives on the I/O thread, owned by its connection's coroutine.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <chrono>
#include <memory>
#include <variant>

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;

class HttpStream {
 public:
  using executor_type = beast::tcp_stream::executor_type;
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;

  // A plain connection.
  explicit HttpStream(asio::ip::tcp::socket sock);
  // A TLS connection (Handshake before the first read); `ctx` is kept
  // alive for as long as the connection, so the server may swap its
  // context (a renewed certificate) for new connections meanwhile.
  HttpStream(asio::ip::tcp::socket sock, std::shared_ptr<ssl::context> ctx);
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  bool is_tls() const { return std::holds_alternative<TlsStream>(s_); }
  // The TCP connection underneath (deadlines, peer address, close).
  beast::tcp_stream& tcp();
  asio::ip::tcp::socket& socket() { return tcp().socket(); }
  executor_type get_executor() { return tcp().get_executor(); }

  void expires_after(std::chrono::steady_clock::duration d) { tcp().expires_after(d); }
  void expires_at(std::chrono::steady_clock::time_point t) { tcp().expires_at(t); }
  void expires_never() { tcp().expires_never(); }
  // Closes the socket at once: pending operations complete with an error.
  void close() { tcp().close(); }
  // Cancels the pending operations (they complete with operation_aborted).
  void cancel() { tcp().cancel(); }

  // The server side of the TLS handshake; nothing to do on a plain one.
  asio::awaitable<boost::system::error_code> Handshake();
  // No more bytes from us. Plain TCP: a half-close. TLS: the same on the
  // TCP connection (no close_notify, which asio can only send by waiting
  // for the peer's, and that would race a pending read). Our answers are
  // always delimited (length or chunks), so the peer loses nothing.
  void ShutdownSend();

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& b, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& bufs) {
          std::visit([&](auto& s) { s.async_read_some(bufs, std::move(handler)); }, s_);
        },
        token, b);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& b, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& bufs) {
          std::visit([&](auto& s) { s.async_write_some(bufs, std::move(handler)); }, s_);
        },
        token, b);
  }

  // For websocket::stream's timeouts (beast::close_socket, found by ADL).
  friend void beast_close_socket(HttpStream& s) { s.close(); }
  // For websocket::stream's closing handshake (found by ADL).
  friend void teardown(beast::role_type role, HttpStream& s, boost::system::error_code& ec);
  template <class Handler>
  friend void async_teardown(beast::role_type role, HttpStream& s, Handler&& handler) {
    using beast::websocket::async_teardown;
    if (auto* tls = std::get_if<TlsStream>(&s.s_))
      async_teardown(role, *tls, std::forward<Handler>(handler));
    else async_teardown(role, std::get<beast::tcp_stream>(s.s_), std::forward<Handler>(handler));
  }

 private:
  std::shared_ptr<ssl::context> ctx_;  // before s_: the TLS stream uses it
  std::variant<beast::tcp_stream, TlsStream> s_;
};

}  // namespace hutch::api
