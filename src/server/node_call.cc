#include "server/node_call.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>

namespace hutch::api {

namespace {

using tcp = asio::ip::tcp;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr uint64_t kAnswerLimit = 64 << 20;

struct HostPort {
  std::string host, port;
};

Result<HostPort> SplitAdvertise(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size())
    return MakeError(Code::kInternal, "node advertise URL " + url + " is not http://HOST:PORT");
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return HostPort{host, rest.substr(colon + 1)};
}

}  // namespace

asio::awaitable<Result<beast::tcp_stream>> DialNode(const std::string& node,
                                                    const std::string& advertise) {
  auto hp = SplitAdvertise(advertise);
  if (!hp.ok()) co_return hp.error();
  auto ex = co_await asio::this_coro::executor;
  boost::system::error_code ec;
  tcp::resolver resolver(ex);
  auto addrs = co_await resolver.async_resolve(hp->host, hp->port,
                                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, "node " + node + ": " + ec.message());
  beast::tcp_stream s(ex);
  s.expires_after(kConnectTimeout);
  co_await s.async_connect(addrs, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return MakeError(Code::kUnavailable,
                        "node " + node + " (" + advertise + ") is unreachable: " + ec.message());
  s.expires_never();
  co_return s;
}

asio::awaitable<Result<http::response<http::string_body>>> CallNode(
    const std::string& node, const std::string& advertise, http::request<http::string_body> req) {
  auto s = co_await DialNode(node, advertise);
  if (!s.ok()) co_return s.error();
  req.set(http::field::connection, "close");
  req.prepare_payload();
  // A create may build its disk or boot a VM; a template fetch copies a
  // whole build.
  s->expires_after(std::chrono::minutes(30));
  boost::system::error_code ec;
  co_await http::async_write(*s, req, asio::redirect_error(asio::use_awaitable, ec));
  beast::flat_buffer buf;
  http::response_parser<http::string_body> rp;
  rp.body_limit(kAnswerLimit);
  if (!ec) co_await http::async_read(*s, buf, rp, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, "node " + node + ": " + ec.message());
  co_return rp.release();
}

}  // namespace hutch::api
