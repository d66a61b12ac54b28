// hutchd's client of the code-interpreter server a sandbox runs on port
// 49999 (src/interpreter/, started by the code-interpreter template). The
// /v1 and OpenSandbox code routes are translated onto its E2B-shaped API
// here; E2B's SDKs reach it directly through the port proxy. The kernels
// run inside the sandbox, under its isolation: hutchd only relays (see
// ARCHITECTURE.md, "Code interpreter").
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/sandbox_manager.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// One execution in flight: the server's newline-delimited JSON lines, one
// by one. Dropping it (or Cancel) closes the connection, which the server
// takes as "the client went away": it interrupts the run and keeps the
// context's state.
class CodeRun {
 public:
  CodeRun(beast::tcp_stream s, std::shared_ptr<Sandbox> sb);
  // The next line; nullopt after `end_of_execution` (or when the server
  // ended the stream without it: UnexpectedEndOfExecution is then the
  // caller's to report). kAgentTimeout once the deadline passed.
  asio::awaitable<Result<std::optional<nlohmann::json>>> Next();
  // From now on Next fails with kAgentTimeout at `deadline` (the
  // connection closes then: the server interrupts).
  void SetDeadline(std::chrono::steady_clock::time_point deadline);
  // The context that runs it (the server's X-Hutch-Context-Id header).
  std::string context_id() const { return std::string(parser_.get()["X-Hutch-Context-Id"]); }
  void Cancel();

  // Reads the answer's header: an error (the refusal's text) unless 200.
  asio::awaitable<Status> ReadHeader();
  // The rest of the body, whole (at most `limit` bytes).
  asio::awaitable<Result<std::string>> ReadAll(size_t limit);

 private:
  beast::tcp_stream s_;
  std::shared_ptr<Sandbox> sb_;  // kept alive while the run is relayed
  beast::flat_buffer buf_;
  http::response_parser<http::buffer_body> parser_;
  std::string pending_;  // bytes after the last complete line
  bool ended_ = false;   // end_of_execution seen, or the stream broke off
};

class CodeClient {
 public:
  static constexpr int kPort = 49999;
  // A single line longer than this (a huge image) ends the run with an
  // error rather than growing without bound.
  static constexpr size_t kMaxLine = 64 << 20;

  explicit CodeClient(SandboxManager* mgr) : mgr_(mgr) {}

  // A context id as the server makes them (hex and dashes) or a client
  // would quote one back: never a path separator or a query, so it can go
  // into the server's path as is.
  static bool ValidContextId(const std::string& s);

  // A call with a JSON answer (the context routes). The server's plain-text
  // refusals become errors: 400 invalid_request, 404 not_found, others
  // unavailable; a sandbox without the server, port_unreachable naming
  // the template that has one.
  asio::awaitable<Result<nlohmann::json>> Call(const std::string& id, http::verb method,
                                               const std::string& target,
                                               const nlohmann::json* body = nullptr);
  // POST /execute with `request` ({code, context_id?, language?,
  // env_vars?}); the answer's header has been read and was 200.
  asio::awaitable<Result<std::unique_ptr<CodeRun>>> Execute(const std::string& id,
                                                            const nlohmann::json& request);

 private:
  asio::awaitable<Result<std::unique_ptr<CodeRun>>> Send(const std::string& id, http::verb method,
                                                         const std::string& target,
                                                         const std::string& body);
  SandboxManager* mgr_;
};

}  // namespace hutch::api
