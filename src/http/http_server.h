// The listener and per-connection loop: HTTP/1.1 keep-alive with Beast on
// C++20 coroutines. One coroutine per connection, no thread per connection:
// idle keep-alive and SSE connections cost a socket and a few KiB.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "http/connection_budget.h"
#include "http/http_stream.h"
#include "http/router.h"

namespace hutch::api {

class HttpServer {
 public:
  HttpServer(asio::io_context& io, Router* router)
      : io_(io),
        router_(router),
        authenticated_gauge_(router->metrics().connections.With({"authenticated"})),
        unauthenticated_gauge_(router->metrics().connections.With({"unauthenticated"})) {}
  // Binds "ADDR:PORT" (port 0: any free port). May be called more than
  // once: every listener serves the same router under one connection
  // budget. `tls`: its connections speak HTTPS (SetTlsContext first).
  Result<asio::ip::tcp::endpoint> Listen(const std::string& addr_port, bool tls = false);
  // The certificate the TLS listeners present to connections accepted
  // from now on (a renewed one replaces the old; open connections keep
  // theirs).
  void SetTlsContext(std::shared_ptr<ssl::context> ctx) { tls_ctx_ = std::move(ctx); }
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
  // kHeaderTimeout for both, as every connection had before. On TLS the
  // first header's deadline covers the handshake too: both count from
  // accept.
  void set_unauthenticated_timeouts(std::chrono::milliseconds first_header,
                                    std::chrono::milliseconds idle) {
    unauth_first_header_ = first_header;
    unauth_idle_ = idle;
  }
  size_t open_connections() const { return budget_.open(); }

 private:
  struct Listener {
    asio::ip::tcp::acceptor acceptor;
    bool tls = false;
  };
  asio::awaitable<void> AcceptLoop(Listener& l);
  asio::awaitable<void> Session(ConnectionBudget::Id id, std::unique_ptr<HttpStream> s);
  asio::awaitable<void> Refuse(std::unique_ptr<HttpStream> s);
  // Admits a new connection (closing the connections that make room for
  // it); 0 when it must be refused.
  ConnectionBudget::Id Admit(const asio::ip::tcp::socket& sock);
  void Authenticate(ConnectionBudget::Id id);
  void Closed(ConnectionBudget::Id id);
  void UpdateGauges();

  asio::io_context& io_;
  Router* router_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::shared_ptr<ssl::context> tls_ctx_;
  ConnectionBudget budget_;
  // The stream of each admitted connection, to close it when evicted
  // (owned by its session coroutine).
  std::unordered_map<ConnectionBudget::Id, HttpStream*> streams_;
  std::chrono::milliseconds unauth_first_header_ = std::chrono::seconds(10);
  std::chrono::milliseconds unauth_idle_ = std::chrono::seconds(5);
  size_t refusing_ = 0;  // 503 answers being written
  Gauge& authenticated_gauge_;
  Gauge& unauthenticated_gauge_;
};

}  // namespace hutch::api
