// The listener and per-connection loop: HTTP/1.1 keep-alive with Beast on
// C++20 coroutines. One coroutine per connection, no thread per connection:
// idle keep-alive and SSE connections cost a socket and a few KiB.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

#include "http/router.h"

namespace hutch::api {

class HttpServer {
 public:
  HttpServer(asio::io_context& io, Router* router) : io_(io), router_(router), acceptor_(io) {}
  // Binds "ADDR:PORT" (port 0: any free port).
  Result<asio::ip::tcp::endpoint> Listen(const std::string& addr_port);
  void Start();
  void Stop();
  // Client connections served at once. Each holds an fd for as long as it
  // is open (an SSE stream: for hours), so without a cap enough clients
  // take every fd hutchd has and sandboxes can no longer be created, or
  // accept() fails and clients hang in the backlog. Beyond the cap a new
  // connection gets a 503 capacity_exhausted and is closed.
  void set_max_connections(size_t n) { max_connections_ = n; }
  size_t open_connections() const { return open_; }

 private:
  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> Session(asio::ip::tcp::socket sock);
  asio::awaitable<void> Refuse(asio::ip::tcp::socket sock);

  asio::io_context& io_;
  Router* router_;
  asio::ip::tcp::acceptor acceptor_;
  size_t max_connections_ = SIZE_MAX;
  size_t open_ = 0;      // sessions running
  size_t refusing_ = 0;  // 503 answers being written
};

}  // namespace hutch::api
