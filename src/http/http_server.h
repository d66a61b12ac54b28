// The listener and per-connection loop: HTTP/1.1 keep-alive with Beast on
// C++20 coroutines. One coroutine per connection, no thread per connection:
// idle keep-alive and SSE connections cost a socket and a few KiB.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "http/connection_budget.h"
#include "http/router.h"

namespace hutch::api {

class HttpServer {
 public:
  HttpServer(asio::io_context& io, Router* router)
      : io_(io),
        router_(router),
        acceptor_(io),
        authenticated_gauge_(router->metrics().connections.With({"authenticated"})),
        unauthenticated_gauge_(router->metrics().connections.With({"unauthenticated"})) {}
  // Binds "ADDR:PORT" (port 0: any free port).
  Result<asio::ip::tcp::endpoint> Listen(const std::string& addr_port);
  void Start();
  void Stop();
  // Client connections served at once. Each holds an fd for as long as it
  // is open (an SSE stream: for hours), so without a cap enough clients
  // take every fd hutchd has and sandboxes can no longer be created, or
  // accept() fails and clients hang in the backlog. Connections that have
  // not authenticated yet have a budget of their own inside the cap
  // (ConnectionBudget): past it, the oldest of them is closed for the
  // newcomer. Only when every open connection has authenticated does a new
  // one get a 503 capacity_exhausted and is closed.
  void set_limits(ConnectionLimits limits) { budget_.set_limits(limits); }
  // Deadlines of a connection that has not authenticated: for the first
  // request's header (from accept), and for the next request's header
  // after an answer (keep-alive idle included). An authenticated one gets
  // kHeaderTimeout for both, as every connection had before.
  void set_unauthenticated_timeouts(std::chrono::milliseconds first_header,
                                    std::chrono::milliseconds idle) {
    unauth_first_header_ = first_header;
    unauth_idle_ = idle;
  }
  size_t open_connections() const { return budget_.open(); }

 private:
  asio::awaitable<void> AcceptLoop();
  asio::awaitable<void> Session(ConnectionBudget::Id id, std::unique_ptr<beast::tcp_stream> s);
  asio::awaitable<void> Refuse(asio::ip::tcp::socket sock);
  // Admits a new connection (closing the connections that make room for
  // it); 0 when it must be refused.
  ConnectionBudget::Id Admit(const asio::ip::tcp::socket& sock);
  void Authenticate(ConnectionBudget::Id id);
  void Closed(ConnectionBudget::Id id);
  void UpdateGauges();

  asio::io_context& io_;
  Router* router_;
  asio::ip::tcp::acceptor acceptor_;
  ConnectionBudget budget_;
  // The stream of each admitted connection, to close it when evicted
  // (owned by its session coroutine).
  std::unordered_map<ConnectionBudget::Id, beast::tcp_stream*> streams_;
  std::chrono::milliseconds unauth_first_header_ = std::chrono::seconds(10);
  std::chrono::milliseconds unauth_idle_ = std::chrono::seconds(5);
  size_t refusing_ = 0;  // 503 answers being written
  Gauge& authenticated_gauge_;
  Gauge& unauthenticated_gauge_;
};

}  // namespace hutch::api
