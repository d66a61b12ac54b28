// One HTTP request being handled: its parsed header, lazy body access
// (whole or streamed), and response writers (whole, streamed, SSE).
// Lives on the I/O thread inside its connection's coroutine.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "auth/principal.h"
#include "common/result.h"
#include "http/http_stream.h"
#include "http/request_target.h"

namespace hutch::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

class HttpContext {
 public:
  HttpContext(HttpStream& stream, beast::flat_buffer& buf,
              http::request_parser<http::empty_body>& hp);

  // --- request
  http::verb method() const { return header_.method(); }
  const std::string& path() const { return path_; }
  std::vector<std::string> segments() const;
  // Decoded query parameters (last one wins for repeated keys).
  const std::map<std::string, std::string>& query() const { return query_; }
  std::optional<std::string> Query(const std::string& key) const;
  // Every decoded query parameter in order, repeated keys included.
  const std::vector<std::pair<std::string, std::string>>& query_list() const { return query_list_; }
  std::string Header(beast::string_view name) const;
  const std::string& request_id() const { return request_id_; }
  bool query_ok() const { return query_ok_; }
  // Who the request speaks for (its key's hash, owner id and role), set by
  // the route's guard (Mount::guard); empty when it used no key.
  const auth::Principal& principal() const { return principal_; }
  void set_principal(auth::Principal p) { principal_ = std::move(p); }
  // The request passed a dialect's credential check (an API key or a
  // sandbox's token; a valid key over its rate limit counts too). Each
  // dialect calls it where it decides, once per credential kind, never per
  // route. Its connection then leaves the unauthenticated budget for good
  // (HttpServer, ConnectionBudget): it is never evicted for a newcomer and
  // gets the ordinary deadlines.
  void MarkAuthenticated() {
    if (authenticated_) return;
    authenticated_ = true;
    if (on_authenticated_) on_authenticated_();
  }
  bool authenticated() const { return authenticated_; }
  void set_authenticated_observer(std::function<void()> f) { on_authenticated_ = std::move(f); }

  // Reads the whole body (at most `limit` bytes: else payload_too_large).
  asio::awaitable<Result<std::string>> ReadBody(size_t limit);
  // Reads the body as JSON (empty body = {}); invalid_request when malformed.
  asio::awaitable<Result<nlohmann::json>> ReadJson(size_t limit);
  // Streams the body to `sink` chunk by chunk (any size); stops at the
  // first sink error.
  asio::awaitable<Status> StreamBody(std::function<asio::awaitable<Status>(std::string_view)> sink);

  // --- response
  asio::awaitable<void> SendJson(int status, const nlohmann::json& body);
  // Every JSON error answer goes through here, and every error reported
  // in-band (an SSE error event) is passed to NoteError, so the observer
  // sees each error a client receives exactly once.
  asio::awaitable<void> SendError(const Error& e);
  void NoteError(const Error& e) {
    if (on_error_) on_error_(e);
  }
  void set_error_observer(std::function<void(const Error&)> f) { on_error_ = std::move(f); }
  asio::awaitable<void> SendEmpty(int status);
  asio::awaitable<void> SendText(int status, const std::string& content_type, std::string body);
  // Streamed response: header first, then chunks. content_length < 0 means
  // chunked transfer encoding. Extra headers as name/value pairs.
  asio::awaitable<Status> BeginStream(
      int status, const std::string& content_type, int64_t content_length,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // A Server-Sent Events stream: BeginStream with the headers every SSE
  // answer needs (no caching, and no buffering by an nginx in front, which
  // would hold events until its buffer fills). Extra headers are added.
  asio::awaitable<Status> BeginSse(std::vector<std::pair<std::string, std::string>> headers = {});
  asio::awaitable<Status> WriteChunk(std::string_view data);
  asio::awaitable<Status> EndStream();
  bool responded() const { return responded_; }
  // A header for the response sent next (whole or streamed).
  void AddHeader(std::string name, std::string value) {
    extra_headers_.emplace_back(std::move(name), std::move(value));
  }
  void ClearHeaders() { extra_headers_.clear(); }

  // Resolves when the client closes its side (used to cancel work whose
  // caller went away). Call once; cancelled by StopWatchingClose().
  void WatchClose(std::function<void()> on_close);
  void StopWatchingClose();

  // --- protocol upgrade (WebSocket)
  // The request header as a message, for websocket::is_upgrade / accept.
  http::request<http::empty_body> RequestHeader() const;
  // Hands the connection to the caller, which answers `status` (101) itself
  // and speaks another protocol on it; no HTTP request is read after it.
  // (Plain or TLS: HttpStream is the one type either way.)
  HttpStream& TakeStream(int status);

  // --- relaying (the port proxy): raw access to the connection. The
  // relay reads the body through parser() (moving it into a parser of
  // another body type, as ReadBody does) and writes its own response;
  // MarkRelayed then records what it did.
  std::string_view target() const { return {header_.target().data(), header_.target().size()}; }
  HttpStream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buf_; }
  http::request_parser<http::empty_body>& parser() { return hp_; }
  // A response of `status` went out by other means than this object; the
  // body was read to its end only if `body_complete`.
  void MarkRelayed(int status, bool body_complete) {
    responded_ = true;
    status_ = status;
    body_read_ = true;
    if (!body_complete) keep_alive_ = false;
  }

  // Whether the connection can carry another request after this one.
  bool keep_alive() const { return keep_alive_; }
  // Closes the connection after this request (e.g. a response that broke
  // off half-way cannot be followed by another one).
  void CloseAfterResponse() { keep_alive_ = false; }
  int status_sent() const { return status_; }

 private:
  asio::awaitable<void> Write(http::response<http::string_body>& res);
  void CommonHeaders(http::response_header<>& h);
  asio::awaitable<void> MaybeContinue();

  HttpStream& stream_;
  beast::flat_buffer& buf_;
  http::request_parser<http::empty_body>& hp_;
  // A copy of the request header: reading the body moves the parser (and
  // the header with it) into a parser of another body type.
  http::request_header<> header_;
  std::string path_;
  std::map<std::string, std::string> query_;
  std::vector<std::pair<std::string, std::string>> query_list_;
  bool query_ok_ = true;
  std::string request_id_;
  auth::Principal principal_;
  bool authenticated_ = false;
  std::function<void()> on_authenticated_;
  bool body_read_ = false;
  bool responded_ = false;
  bool keep_alive_ = true;
  int status_ = 0;
  // streamed response state
  std::unique_ptr<http::response<http::buffer_body>> sres_;
  std::unique_ptr<http::response_serializer<http::buffer_body>> ssr_;
  bool watching_ = false;
  std::vector<std::pair<std::string, std::string>> extra_headers_;
  std::function<void(const Error&)> on_error_;
};

}  // namespace hutch::api
