// A small synchronous HTTP/1.1 client of hutchd, shared by the `hutch` CLI,
// the benchmarks and the integration tests (one client, not one per test).
// One keep-alive connection per HttpClient; not thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hutch::client {

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json json() const;  // parsed body (null if not JSON)
  std::string header(const std::string& lower_name) const;
};

struct SseEvent {
  std::string event;
  std::string data;
  std::string id;  // the event's `id:` field, empty when it had none
};

class HttpClient {
 public:
  HttpClient(std::string host, int port, std::string api_key = "");
  ~HttpClient();

  // Whole request, whole response. Throws std::runtime_error on transport
  // failure (connection refused, reset).
  Response Request(const std::string& method, const std::string& target,
                   const std::string& body = "",
                   const std::map<std::string, std::string>& headers = {});
  Response Json(const std::string& method, const std::string& target, const nlohmann::json& body);

  // Uploads `total` bytes pulled from `source(buf, max) -> n` with a
  // Content-Length body.
  Response Upload(const std::string& target, uint64_t total,
                  const std::function<size_t(char*, size_t)>& source,
                  const std::map<std::string, std::string>& headers = {});
  // Downloads, handing body bytes to `sink` as they arrive; the returned
  // Response has an empty body unless the status is an error.
  Response Download(const std::string& target, const std::function<void(const char*, size_t)>& sink,
                    const std::map<std::string, std::string>& headers = {});
  // POSTs JSON and reads a text/event-stream, one callback per event;
  // returning false from `on_event` closes the connection mid-stream.
  Response Sse(const std::string& target, const nlohmann::json& body,
               const std::function<bool(const SseEvent&)>& on_event);
  // Same with any method, body and headers (e.g. a GET with Last-Event-ID).
  Response SseRequest(const std::string& method, const std::string& target, const std::string& body,
                      const std::map<std::string, std::string>& headers,
                      const std::function<bool(const SseEvent&)>& on_event);

  // Drops the connection (the next request opens a new one).
  void Close();
  // The socket of the current connection (-1 if none). A signal handler may
  // shutdown() it to abort a blocking call (async-signal-safe).
  int native_handle() const;
  void set_api_key(std::string k) { api_key_ = std::move(k); }

 private:
  void Connect();
  std::string host_;
  int port_;
  std::string api_key_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::beast::tcp_stream> stream_;
  boost::beast::flat_buffer buf_;
};

// Helpers for tests and tools: base64 decode of SSE "b64" fields.
std::string Base64Decode(const std::string& in);

}  // namespace hutch::client
