// The listener and per-connection loop: HTTP/1.1 keep-alive with Beast on
// C++20 coroutines. One coroutine per connection, no thread per connection:
// idle keep-alive and SSE connections cost a socket and a few KiB.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

#include "api/api.h"

namespace hutch::api {

class HttpServer {
 public:
  HttpServer(asio::io_context& io, Api* api) : io_(io), api_(api), acceptor_(io) {}
  // Binds "ADDR:PORT" (port 0: any free port).
  Result<asio::ip::tcp::endpoint> Listen(const std::string& addr_port);
  void Start();
  void Stop();

 private:
  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> Session(asio::ip::tcp::socket sock);

  asio::io_context& io_;
  Api* api_;
  asio::ip::tcp::acceptor acceptor_;
};

}  // namespace hutch::api
