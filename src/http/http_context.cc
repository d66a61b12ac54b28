#include "http/http_context.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/algorithm/string/predicate.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>
#include "common/clock.h"
#include "common/header_value.h"

namespace hutch::api {

namespace {
constexpr auto kBodyIdleTimeout = std::chrono::seconds(60);
constexpr auto kWriteTimeout = std::chrono::seconds(300);

bool ValidRequestId(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (unsigned char c : s)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}
}  // namespace

HttpContext::HttpContext(HttpStream& stream, beast::flat_buffer& buf,
                         http::request_parser<http::empty_body>& hp)
    : stream_(stream), buf_(buf), hp_(hp), header_(hp.get().base()) {
  RequestTarget t =
      ParseRequestTarget(std::string_view(hp_.get().target().data(), hp_.get().target().size()));
  path_ = std::move(t.path);
  query_ = std::move(t.query);
  query_list_ = std::move(t.query_list);
  query_ok_ = t.ok;
  std::string rid = Header("X-Request-Id");
  request_id_ = ValidRequestId(rid) ? rid : "r_" + RandomHex(10);
  keep_alive_ = hp_.get().keep_alive();
  // A request without a body (no length, not chunked) has nothing to read.
  if (!hp_.get().has_content_length() && !hp_.get().chunked()) body_read_ = true;
  if (hp_.content_length() && *hp_.content_length() == 0) body_read_ = true;
}

std::vector<std::string> HttpContext::segments() const { return PathSegments(path_); }

std::optional<std::string> HttpContext::Query(const std::string& key) const {
  auto it = query_.find(key);
  if (it == query_.end()) return std::nullopt;
  return it->second;
}

std::string HttpContext::Header(beast::string_view name) const {
  auto it = header_.find(name);
  if (it == header_.end()) return {};
  return std::string(it->value());
}

asio::awaitable<void> HttpContext::MaybeContinue() {
  // curl and others wait up to a second for "100 Continue" before sending
  // a large body; answer at once so uploads start immediately.
  auto expect = Header("Expect");
  if (expect.size() == 12 && beast::iequals(expect, "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, 11};
    boost::system::error_code ec;
    stream_.expires_after(kWriteTimeout);
    co_await http::async_write(stream_, cont, asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<Result<std::string>> HttpContext::ReadBody(size_t limit) {
  if (body_read_) co_return std::string();
  body_read_ = true;
  if (hp_.content_length() && *hp_.content_length() > limit) {
    keep_alive_ = false;
    co_return MakeError(Code::kPayloadTooLarge,
                        "request body exceeds " + std::to_string(limit) + " bytes");
  }
  co_await MaybeContinue();
  http::request_parser<http::string_body> p{std::move(hp_)};
  p.body_limit(limit);
  boost::system::error_code ec;
  stream_.expires_after(kBodyIdleTimeout);
  co_await http::async_read(stream_, buf_, p, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    co_return MakeError(Code::kPayloadTooLarge,
                        "request body exceeds " + std::to_string(limit) + " bytes");
  }
  if (ec) {
    keep_alive_ = false;
    co_return MakeError(Code::kInvalidRequest, "reading request body: " + ec.message());
  }
  std::string body = std::move(p.get().body());
  co_return body;
}

asio::awaitable<Result<nlohmann::json>> HttpContext::ReadJson(size_t limit) {
  auto body = co_await ReadBody(limit);
  if (!body.ok()) co_return body.error();
  if (body->empty()) co_return nlohmann::json::object();
  try {
    auto j = nlohmann::json::parse(*body);
    if (!j.is_object())
      co_return MakeError(Code::kInvalidRequest, "request body must be a JSON object");
    co_return j;
  } catch (const nlohmann::json::exception& e) {
    co_return MakeError(Code::kInvalidRequest, std::string("malformed JSON: ") + e.what());
  }
}

asio::awaitable<Status> HttpContext::StreamBody(
    std::function<asio::awaitable<Status>(std::string_view)> sink) {
  if (body_read_) co_return Status{};
  body_read_ = true;
  co_await MaybeContinue();
  http::request_parser<http::buffer_body> p{std::move(hp_)};
  p.body_limit(
      std::numeric_limits<std::uint64_t>::max());  // bounded by the sandbox's disk quota instead
  std::vector<char> chunk(256 * 1024);
  while (!p.is_done()) {
    p.get().body().data = chunk.data();
    p.get().body().size = chunk.size();
    boost::system::error_code ec;
    stream_.expires_after(kBodyIdleTimeout);
    co_await http::async_read(stream_, buf_, p, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      keep_alive_ = false;
      co_return MakeError(Code::kInvalidRequest, "reading request body: " + ec.message());
    }
    size_t n = chunk.size() - p.get().body().size;
    if (n == 0) continue;
    if (auto st = co_await sink(std::string_view(chunk.data(), n)); !st.ok()) {
      keep_alive_ = false;  // the rest of the body is not read
      co_return st;
    }
  }
  co_return Status{};
}

void HttpContext::CommonHeaders(http::response_header<>& h) {
  h.set(http::field::server, "hutchd");
  h.set("X-Request-Id", request_id_);
  for (const auto& [k, v] : extra_headers_)
    if (IsSafeHeaderValue(v)) h.set(k, v);  // CR/LF would end the header: dropped (issue 32)
  // An unread body would be parsed as the next request: close instead.
  if (!body_read_) keep_alive_ = false;
  h.set(http::field::connection, keep_alive_ ? "keep-alive" : "close");
}

asio::awaitable<void> HttpContext::Write(http::response<http::string_body>& res) {
  responded_ = true;
  status_ = res.result_int();
  CommonHeaders(res.base());
  res.prepare_payload();
  boost::system::error_code ec;
  stream_.expires_after(kWriteTimeout);
  co_await http::async_write(stream_, res, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) keep_alive_ = false;
}

asio::awaitable<void> HttpContext::SendJson(int status, const nlohmann::json& body) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  res.body().push_back('\n');
  co_await Write(res);
}

asio::awaitable<void> HttpContext::SendError(const Error& e) {
  NoteError(e);
  // A full host clears as sandboxes end or memory frees: tell clients to
  // come back rather than leave each to guess (a handler that knows
  // better, the rate limit, has set its own).
  const bool has_retry_after =
      std::any_of(extra_headers_.begin(), extra_headers_.end(),
                  [](const auto& h) { return boost::iequals(h.first, "Retry-After"); });
  if (e.code == Code::kCapacityExhausted && !has_retry_after) AddHeader("Retry-After", "1");
  nlohmann::json j = {{"code", CodeName(e.code)},
                      {"message", e.message},
                      {"request_id", request_id_},
                      {"retryable", CodeRetryable(e.code)}};
  co_await SendJson(CodeHttpStatus(e.code), j);
}

asio::awaitable<void> HttpContext::SendEmpty(int status) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  co_await Write(res);
}

asio::awaitable<void> HttpContext::SendText(int status, const std::string& content_type,
                                            std::string body) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  co_await Write(res);
}

asio::awaitable<Status> HttpContext::BeginSse(
    std::vector<std::pair<std::string, std::string>> headers) {
  headers.emplace_back("Cache-Control", "no-cache");
  headers.emplace_back("X-Accel-Buffering", "no");
  co_return co_await BeginStream(200, "text/event-stream", -1, headers);
}

asio::awaitable<Status> HttpContext::BeginStream(
    int status, const std::string& content_type, int64_t content_length,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  responded_ = true;
  status_ = status;
  sres_ =
      std::make_unique<http::response<http::buffer_body>>(static_cast<http::status>(status), 11);
  auto& res = *sres_;
  res.set(http::field::content_type, content_type);
  for (const auto& [k, v] : headers)
    if (IsSafeHeaderValue(v)) res.set(k, v);  // CR/LF would end the header: dropped (issue 32)
  CommonHeaders(res.base());
  if (content_length >= 0) res.content_length(static_cast<uint64_t>(content_length));
  else res.chunked(true);
  res.body().data = nullptr;
  res.body().more = true;
  ssr_ = std::make_unique<http::response_serializer<http::buffer_body>>(res);
  boost::system::error_code ec;
  stream_.expires_after(kWriteTimeout);
  co_await http::async_write_header(stream_, *ssr_, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    keep_alive_ = false;
    co_return MakeError(Code::kUnavailable, "client went away: " + ec.message());
  }
  co_return Status{};
}

asio::awaitable<Status> HttpContext::WriteChunk(std::string_view data) {
  if (data.empty()) co_return Status{};
  auto& res = *sres_;
  res.body().data = const_cast<char*>(data.data());
  res.body().size = data.size();
  res.body().more = true;
  boost::system::error_code ec;
  stream_.expires_after(kWriteTimeout);
  co_await http::async_write(stream_, *ssr_, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    keep_alive_ = false;
    co_return MakeError(Code::kUnavailable, "client went away: " + ec.message());
  }
  co_return Status{};
}

asio::awaitable<Status> HttpContext::EndStream() {
  auto& res = *sres_;
  res.body().data = nullptr;
  res.body().size = 0;
  res.body().more = false;
  boost::system::error_code ec;
  stream_.expires_after(kWriteTimeout);
  co_await http::async_write(stream_, *ssr_, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    keep_alive_ = false;
    co_return MakeError(Code::kUnavailable, "client went away: " + ec.message());
  }
  co_return Status{};
}

http::request<http::empty_body> HttpContext::RequestHeader() const {
  http::request<http::empty_body> r;
  r.base() = header_;
  return r;
}

HttpStream& HttpContext::TakeStream(int status) {
  responded_ = true;
  status_ = status;
  keep_alive_ = false;
  return stream_;
}

void HttpContext::WatchClose(std::function<void()> on_close) {
  watching_ = true;
  auto& sock = stream_.socket();
  sock.async_wait(asio::ip::tcp::socket::wait_read,
                  [&sock, this, cb = std::move(on_close)](boost::system::error_code ec) {
                    if (ec) return;  // cancelled: the request finished first
                    char c;
                    ssize_t n = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
                    // 0: orderly close; <0 with a real error: reset. Pipelined bytes (n>0)
                    // mean the client is alive.
                    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                      keep_alive_ = false;
                      cb();
                    }
                  });
}

void HttpContext::StopWatchingClose() {
  if (!watching_) return;
  watching_ = false;
  boost::system::error_code ec;
  // Cancels only the pending wait; nothing else is outstanding on the
  // socket while a handler runs.
  stream_.socket().cancel(ec);
}

}  // namespace hutch::api
