#include "http/http_stream.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace hutch::api {

HttpStream::HttpStream(asio::ip::tcp::socket sock)
    : s_(std::in_place_type<beast::tcp_stream>, std::move(sock)) {}

HttpStream::HttpStream(asio::ip::tcp::socket sock, std::shared_ptr<ssl::context> ctx)
    : ctx_(std::move(ctx)), s_(std::in_place_type<TlsStream>, std::move(sock), *ctx_) {}

beast::tcp_stream& HttpStream::tcp() {
  if (auto* tls = std::get_if<TlsStream>(&s_)) return tls->next_layer();
  return std::get<beast::tcp_stream>(s_);
}

asio::awaitable<boost::system::error_code> HttpStream::Handshake() {
  boost::system::error_code ec;
  if (auto* tls = std::get_if<TlsStream>(&s_))
    co_await tls->async_handshake(ssl::stream_base::server,
                                  asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

void HttpStream::ShutdownSend() {
  boost::system::error_code ec;
  socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

void teardown(beast::role_type role, HttpStream& s, boost::system::error_code& ec) {
  using beast::websocket::teardown;
  if (auto* tls = std::get_if<HttpStream::TlsStream>(&s.s_)) teardown(role, *tls, ec);
  else teardown(role, std::get<beast::tcp_stream>(s.s_).socket(), ec);
}

}  // namespace hutch::api
