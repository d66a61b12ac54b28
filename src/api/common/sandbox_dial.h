// A TCP connection from hutchd to a port inside a sandbox: the socket is
// made in the sandbox's network namespace and connects to
// Instance::PortAddress() there (a jail's 127.0.0.1, a vm guest's address
// on its tap link), so nothing of the host's network is involved. Used by
// the port proxy and by the code-interpreter client.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <string>

#include "common/result.h"
#include "driver/driver.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;

// Connected (no-delay) or port_unreachable when nothing accepts there
// within `timeout`.
asio::awaitable<Result<beast::tcp_stream>> DialSandboxPort(Instance& inst, const std::string& id,
                                                           int port,
                                                           std::chrono::milliseconds timeout);

}  // namespace hutch::api
