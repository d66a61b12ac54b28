#include "client/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

#include "common/base64.h"

namespace hutch::client {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

nlohmann::json Response::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (...) {
    return nullptr;
  }
}

std::string Response::header(const std::string& n) const {
  auto it = headers.find(n);
  return it == headers.end() ? std::string() : it->second;
}

HttpClient::HttpClient(std::string host, int port, std::string api_key)
    : host_(std::move(host)), port_(port), api_key_(std::move(api_key)) {}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (stream_) {
    beast::error_code ec;
    stream_->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    stream_->close();
    stream_.reset();
  }
  buf_.clear();
}

int HttpClient::native_handle() const {
  return stream_ ? const_cast<boost::beast::tcp_stream&>(*stream_).socket().native_handle() : -1;
}

void HttpClient::Connect() {
  if (stream_) return;
  stream_ = std::make_unique<beast::tcp_stream>(io_);
  asio::ip::tcp::endpoint ep(asio::ip::make_address(host_), static_cast<unsigned short>(port_));
  stream_->connect(ep);
  stream_->socket().set_option(asio::ip::tcp::no_delay(true));
}

namespace {

template <class Req>
void SetCommon(Req& req, const std::string& host, const std::string& key,
               const std::map<std::string, std::string>& headers) {
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "hutch-client");
  if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
  for (const auto& [k, v] : headers) req.set(k, v);
}

template <class Msg>
void CopyHeaders(const Msg& m, Response* r) {
  r->status = m.result_int();
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    r->headers[name] = std::string(f.value());
  }
}

}  // namespace

Response HttpClient::Request(const std::string& method, const std::string& target,
                             const std::string& body,
                             const std::map<std::string, std::string>& headers) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = !stream_;
    Connect();
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    SetCommon(req, host_, api_key_, headers);
    req.body() = body;
    if (!body.empty() && req.find(http::field::content_type) == req.end())
      req.set(http::field::content_type, "application/json");
    req.prepare_payload();
    beast::error_code ec;
    http::write(*stream_, req, ec);
    http::response_parser<http::string_body> p;
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    // A HEAD answer's Content-Length describes the GET: no body follows.
    if (req.method() == http::verb::head) p.skip(true);
    if (!ec) http::read(*stream_, buf_, p, ec);
    if (ec) {
      Close();
      // A keep-alive connection the server closed meanwhile: retry once.
      if (!fresh && attempt == 0) continue;
      throw std::runtime_error("http " + method + " " + target + ": " + ec.message());
    }
    Response r;
    CopyHeaders(p.get(), &r);
    r.body = std::move(p.get().body());
    if (!p.get().keep_alive()) Close();
    return r;
  }
  throw std::runtime_error("unreachable");
}

Response HttpClient::Json(const std::string& method, const std::string& target,
                          const nlohmann::json& body) {
  return Request(method, target, body.dump());
}

Response HttpClient::Upload(const std::string& target, uint64_t total,
                            const std::function<size_t(char*, size_t)>& source,
                            const std::map<std::string, std::string>& headers) {
  Close();
  Connect();
  http::request<http::buffer_body> req{http::verb::put, target, 11};
  SetCommon(req, host_, api_key_, headers);
  req.set(http::field::content_type, "application/octet-stream");
  req.content_length(total);
  req.body().data = nullptr;
  req.body().more = true;
  http::request_serializer<http::buffer_body> sr{req};
  beast::error_code ec;
  http::write_header(*stream_, sr, ec);
  std::vector<char> chunk(256 * 1024);
  uint64_t sent = 0;
  while (!ec && sent < total) {
    size_t n =
        source(chunk.data(), static_cast<size_t>(std::min<uint64_t>(chunk.size(), total - sent)));
    if (n == 0) throw std::runtime_error("upload source ended early");
    req.body().data = chunk.data();
    req.body().size = n;
    req.body().more = true;
    http::write(*stream_, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
    sent += n;
  }
  if (!ec) {
    req.body().data = nullptr;
    req.body().size = 0;
    req.body().more = false;
    http::write(*stream_, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
  }
  // Even after a write error the server may have answered (e.g. disk full).
  http::response_parser<http::string_body> p;
  beast::error_code rec;
  http::read(*stream_, buf_, p, rec);
  if (rec) {
    Close();
    throw std::runtime_error("upload " + target + ": " + (ec ? ec.message() : rec.message()));
  }
  Response r;
  CopyHeaders(p.get(), &r);
  r.body = std::move(p.get().body());
  Close();
  return r;
}

Response HttpClient::Download(const std::string& target,
                              const std::function<void(const char*, size_t)>& sink,
                              const std::map<std::string, std::string>& headers) {
  Close();
  Connect();
  http::request<http::empty_body> req{http::verb::get, target, 11};
  SetCommon(req, host_, api_key_, headers);
  beast::error_code ec;
  http::write(*stream_, req, ec);
  if (ec) throw std::runtime_error("download " + target + ": " + ec.message());
  http::response_parser<http::buffer_body> p;
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(*stream_, buf_, p, ec);
  if (ec) throw std::runtime_error("download header " + target + ": " + ec.message());
  Response r;
  CopyHeaders(p.get(), &r);
  std::vector<char> chunk(256 * 1024);
  while (!p.is_done()) {
    p.get().body().data = chunk.data();
    p.get().body().size = chunk.size();
    // read_some: hand on what has arrived; read() would wait for a full
    // buffer and hold small events back until the stream ends.
    http::read_some(*stream_, buf_, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      Close();
      throw std::runtime_error("download body " + target + ": " + ec.message());
    }
    size_t n = chunk.size() - p.get().body().size;
    if (r.status >= 400) r.body.append(chunk.data(), n);
    else if (n > 0) sink(chunk.data(), n);
  }
  Close();
  return r;
}

Response HttpClient::Sse(const std::string& target, const nlohmann::json& body,
                         const std::function<bool(const SseEvent&)>& on_event) {
  return SseRequest("POST", target, body.dump(), {{"Content-Type", "application/json"}}, on_event);
}

Response HttpClient::SseRequest(const std::string& method, const std::string& target,
                                const std::string& body,
                                const std::map<std::string, std::string>& headers,
                                const std::function<bool(const SseEvent&)>& on_event) {
  Close();
  Connect();
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  SetCommon(req, host_, api_key_, headers);
  req.set(http::field::accept, "text/event-stream");
  req.body() = body;
  if (!body.empty() || req.method() == http::verb::post) req.prepare_payload();
  beast::error_code ec;
  http::write(*stream_, req, ec);
  if (ec) throw std::runtime_error("sse " + target + ": " + ec.message());
  http::response_parser<http::buffer_body> p;
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(*stream_, buf_, p, ec);
  if (ec) throw std::runtime_error("sse header " + target + ": " + ec.message());
  Response r;
  CopyHeaders(p.get(), &r);
  // An answer that is not an event stream (an error, or a JSON answer of
  // an endpoint that streams only some answers, as /mcp) is kept whole.
  const bool events = r.header("content-type").rfind("text/event-stream", 0) == 0;
  std::vector<char> chunk(64 * 1024);
  std::string pending;
  SseEvent cur;
  while (!p.is_done()) {
    p.get().body().data = chunk.data();
    p.get().body().size = chunk.size();
    // read_some: hand on what has arrived; read() would wait for a full
    // buffer and hold small events back until the stream ends.
    http::read_some(*stream_, buf_, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      Close();
      r.headers["x-stream-error"] = ec.message();
      return r;
    }
    size_t n = chunk.size() - p.get().body().size;
    if (r.status >= 400 || !events) {
      r.body.append(chunk.data(), n);
      continue;
    }
    pending.append(chunk.data(), n);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.empty()) {
        if (!cur.event.empty() || !cur.data.empty()) {
          if (!on_event(cur)) {
            Close();
            return r;
          }
        }
        cur = SseEvent{};
      } else if (line[0] == ':') {
        continue;
      } else if (line.rfind("event: ", 0) == 0) {
        cur.event = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        if (!cur.data.empty()) cur.data += "\n";
        cur.data += line.substr(6);
      } else if (line.rfind("id: ", 0) == 0) {
        cur.id = line.substr(4);
      }
    }
  }
  Close();
  return r;
}

std::string Base64Decode(const std::string& in) {
  std::string out;
  if (!hutch::Base64Decode(in, &out))
    throw std::runtime_error("malformed base64 in a server answer");
  return out;
}

}  // namespace hutch::client
