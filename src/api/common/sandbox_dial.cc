#include "api/common/sandbox_dial.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/netns_socket.h"

namespace hutch::api {

using tcp = asio::ip::tcp;

asio::awaitable<Result<beast::tcp_stream>> DialSandboxPort(Instance& inst, const std::string& id,
                                                           int port,
                                                           std::chrono::milliseconds timeout) {
  auto ns = inst.NetNamespace();
  if (!ns.ok()) co_return ns.error().Context("sandbox " + id);
  auto fd = TcpSocketInNetns(ns->get());
  if (!fd.ok()) co_return fd.error().Context("sandbox " + id);
  boost::system::error_code ec;
  auto ex = co_await asio::this_coro::executor;
  tcp::socket raw(ex);
  raw.assign(tcp::v4(), fd->release(), ec);
  if (ec) co_return MakeError(Code::kInternal, "adopt proxy socket: " + ec.message());
  beast::tcp_stream up(std::move(raw));
  up.expires_after(timeout);
  const tcp::endpoint dest(asio::ip::make_address_v4(inst.PortAddress()),
                           static_cast<unsigned short>(port));
  co_await up.async_connect(dest, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return MakeError(Code::kPortUnreachable, "nothing accepts connections on port " +
                                                    std::to_string(port) + " in sandbox " + id +
                                                    " (" + ec.message() + ")");
  up.expires_never();
  up.socket().set_option(tcp::no_delay(true), ec);
  co_return Result<beast::tcp_stream>(std::move(up));
}

}  // namespace hutch::api
