#include "cluster/etcd_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/base64.h"

namespace hutch::cluster {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// etcd's JSON carries int64s as strings ("123"); absent means 0.
int64_t Int(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

std::string Decode(const nlohmann::json& j, const char* name) {
  std::string out;
  auto it = j.find(name);
  if (it != j.end() && it->is_string()) Base64Decode(it->get<std::string>(), &out);
  return out;
}

// The first key after every key that starts with `prefix` (etcd's
// range_end for a prefix scan).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) < 0xff) {
      ++c;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

nlohmann::json OpJson(const TxnOp& op) {
  if (op.kind == TxnOp::Kind::kDelete)
    return {{"request_delete_range", {{"key", Base64Encode(op.key)}}}};
  nlohmann::json put = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
  if (op.lease != 0) put["lease"] = std::to_string(op.lease);
  return {{"request_put", put}};
}

// A TLS client context for etcd: the CA (or the system's store), the
// client certificate and key when given.
Result<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const EtcdTls& tls) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  if (!tls.ca.empty()) ctx->load_verify_file(tls.ca, ec);
  else ctx->set_default_verify_paths(ec);
  if (ec) return MakeError(Code::kInvalidRequest, "etcd CA " + tls.ca + ": " + ec.message());
  if (tls.cert.empty() != tls.key.empty())
    return MakeError(Code::kInvalidRequest, "an etcd client certificate needs its key, and back");
  if (!tls.cert.empty()) {
    ctx->use_certificate_chain_file(tls.cert, ec);
    if (ec)
      return MakeError(Code::kInvalidRequest, "etcd client cert " + tls.cert + ": " + ec.message());
    ctx->use_private_key_file(tls.key, asio::ssl::context::pem, ec);
    if (ec)
      return MakeError(Code::kInvalidRequest, "etcd client key " + tls.key + ": " + ec.message());
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

// One request and its answer over an open connection (plain or TLS).
template <class Stream>
asio::awaitable<boost::system::error_code> Exchange(Stream& s,
                                                    const http::request<http::string_body>& req,
                                                    http::response_parser<http::string_body>& rp) {
  boost::system::error_code ec;
  co_await http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return ec;
  beast::flat_buffer buf;
  co_await http::async_read(s, buf, rp, asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

}  // namespace

EtcdClient::EtcdClient(asio::any_io_executor ex, std::vector<std::string> endpoints, EtcdTls tls)
    : ex_(std::move(ex)) {
  bool any_tls = false;
  for (auto& e : endpoints) {
    Endpoint ep;
    if (e.rfind("https://", 0) == 0) {
      ep.tls = any_tls = true;
      e = e.substr(8);
    } else if (e.rfind("http://", 0) == 0) {
      e = e.substr(7);
    }
    while (!e.empty() && e.back() == '/') e.pop_back();
    const size_t colon = e.rfind(':');
    ep.host = e.substr(0, colon);
    ep.port = colon == std::string::npos ? "2379" : e.substr(colon + 1);
    endpoints_.push_back(std::move(ep));
  }
  if (any_tls) {
    auto ctx = MakeTlsContext(tls);
    if (ctx.ok()) ssl_ = std::move(ctx).value();
    else tls_error_ = ctx.error().message;
  }
}

Status EtcdClient::CheckTls(const EtcdTls& tls) {
  auto ctx = MakeTlsContext(tls);
  if (!ctx.ok()) return ctx.error();
  return {};
}

Result<std::vector<std::string>> EtcdClient::ParseEndpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string e = list.substr(start, comma - start);
    start = comma + 1;
    if (e.empty()) continue;
    const bool https = e.rfind("https://", 0) == 0;
    if (e.find("://") != std::string::npos && e.rfind("http://", 0) != 0 && !https)
      return MakeError(Code::kInvalidRequest,
                       "--cluster-etcd " + e + ": only http:// and https:// endpoints are spoken");
    std::string hostport = e.substr(e.find("://") == std::string::npos ? 0 : e.find("://") + 3);
    if (hostport.find(':') == std::string::npos)
      return MakeError(Code::kInvalidRequest, "--cluster-etcd " + e + ": expected HOST:PORT");
    out.push_back(e);
  }
  if (out.empty()) return MakeError(Code::kInvalidRequest, "--cluster-etcd: no endpoint given");
  return out;
}

asio::awaitable<Result<nlohmann::json>> EtcdClient::CallOne(const Endpoint& ep,
                                                            const std::string& path,
                                                            const std::string& body) {
  const std::string where = "etcd " + ep.host + ":" + ep.port;
  if (ep.tls && !ssl_) co_return MakeError(Code::kInvalidRequest, where + ": " + tls_error_);
  boost::system::error_code ec;
  tcp::resolver resolver(ex_);
  auto addrs = co_await resolver.async_resolve(ep.host, ep.port,
                                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, where + ": " + ec.message());
  beast::tcp_stream s(ex_);
  s.expires_after(timeout_);
  co_await s.async_connect(addrs, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return MakeError(Code::kUnavailable, where + ": " + ec.message());
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, ep.host + ":" + ep.port);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::connection, "close");
  req.body() = body;
  req.prepare_payload();
  http::response_parser<http::string_body> rp;
  rp.body_limit(64 << 20);
  if (ep.tls) {
    beast::ssl_stream<beast::tcp_stream> ts(std::move(s), *ssl_);
    // The member's name as the URL gave it (SNI and the certificate check).
    SSL_set_tlsext_host_name(ts.native_handle(), ep.host.c_str());
    ts.set_verify_callback(asio::ssl::host_name_verification(ep.host));
    co_await ts.async_handshake(asio::ssl::stream_base::client,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return MakeError(Code::kUnavailable, where + ": TLS: " + ec.message());
    ec = co_await Exchange(ts, req, rp);
    // A member closing without a TLS close_notify after a whole answer.
    if (ec == asio::ssl::error::stream_truncated && rp.is_done()) ec = {};
  } else {
    ec = co_await Exchange(s, req, rp);
    beast::error_code ignored;
    s.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }
  if (ec) co_return MakeError(Code::kUnavailable, "etcd " + path + ": " + ec.message());
  const auto& res = rp.get();
  // A streaming call (keepalive) answers one JSON object a line: the
  // first is the answer to our one message.
  std::string text = res.body();
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (res.result_int() != 200 || j.is_discarded()) {
    std::string why = text.substr(0, 200);
    if (j.is_object() && j.contains("error") && j["error"].is_string())
      why = j["error"].get<std::string>();
    Code code = Code::kInternal;
    if (res.result_int() >= 500) code = Code::kUnavailable;
    co_return MakeError(
        code, "etcd " + path + " answered " + std::to_string(res.result_int()) + ": " + why);
  }
  co_return j;
}

asio::awaitable<Result<nlohmann::json>> EtcdClient::Call(const std::string& path,
                                                         const nlohmann::json& body) {
  const std::string text = body.dump();
  Error last = MakeError(Code::kUnavailable, "etcd: no endpoint");
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t at = (preferred_ + i) % endpoints_.size();
    const Endpoint& ep = endpoints_[at];
    auto r = co_await CallOne(ep, path, text);
    if (r.ok()) {
      preferred_ = at;
      co_return r;
    }
    last = r.error();
    // Only a member that cannot be reached is worth trying another for.
    if (last.code != Code::kUnavailable) break;
  }
  co_return last;
}

asio::awaitable<Result<int64_t>> EtcdClient::Grant(int64_t ttl) {
  const nlohmann::json body = {{"TTL", std::to_string(ttl)}};
  auto j = co_await Call("/v3/lease/grant", body);
  if (!j.ok()) co_return j.error();
  const int64_t id = Int(*j, "ID");
  if (id == 0) co_return MakeError(Code::kInternal, "etcd lease grant gave no lease id");
  co_return id;
}

asio::awaitable<Result<int64_t>> EtcdClient::KeepAlive(int64_t lease) {
  const nlohmann::json body = {{"ID", std::to_string(lease)}};
  auto j = co_await Call("/v3/lease/keepalive", body);
  if (!j.ok()) co_return j.error();
  auto it = j->find("result");
  if (it == j->end()) co_return MakeError(Code::kInternal, "etcd keepalive: no result");
  co_return Int(*it, "TTL");
}

asio::awaitable<Status> EtcdClient::Revoke(int64_t lease) {
  const nlohmann::json body = {{"ID", std::to_string(lease)}};
  auto j = co_await Call("/v3/lease/revoke", body);
  if (!j.ok()) co_return j.error();
  co_return Status{};
}

asio::awaitable<Status> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  nlohmann::json body = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  auto j = co_await Call("/v3/kv/put", body);
  if (!j.ok()) co_return j.error();
  co_return Status{};
}

namespace {
std::vector<KeyValue> Kvs(const nlohmann::json& j) {
  std::vector<KeyValue> out;
  auto it = j.find("kvs");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& kv : *it)
    out.push_back(KeyValue{Decode(kv, "key"), Decode(kv, "value"), Int(kv, "lease"),
                           Int(kv, "mod_revision"), Int(kv, "version")});
  return out;
}
}  // namespace

asio::awaitable<Result<std::optional<KeyValue>>> EtcdClient::Get(const std::string& key) {
  const nlohmann::json body = {{"key", Base64Encode(key)}};
  auto j = co_await Call("/v3/kv/range", body);
  if (!j.ok()) co_return j.error();
  auto kvs = Kvs(*j);
  if (kvs.empty()) co_return std::optional<KeyValue>();
  co_return std::optional<KeyValue>(std::move(kvs.front()));
}

asio::awaitable<Result<std::vector<KeyValue>>> EtcdClient::Prefix(const std::string& prefix) {
  const nlohmann::json body = {{"key", Base64Encode(prefix)},
                               {"range_end", Base64Encode(PrefixEnd(prefix))}};
  auto j = co_await Call("/v3/kv/range", body);
  if (!j.ok()) co_return j.error();
  co_return Kvs(*j);
}

asio::awaitable<Status> EtcdClient::Delete(const std::string& key) {
  const nlohmann::json body = {{"key", Base64Encode(key)}};
  auto j = co_await Call("/v3/kv/deleterange", body);
  if (!j.ok()) co_return j.error();
  co_return Status{};
}

asio::awaitable<Result<bool>> EtcdClient::Txn(nlohmann::json compare, std::vector<TxnOp> ops) {
  nlohmann::json success = nlohmann::json::array();
  for (const auto& op : ops) success.push_back(OpJson(op));
  nlohmann::json body = {{"compare", nlohmann::json::array({std::move(compare)})},
                         {"success", std::move(success)}};
  auto j = co_await Call("/v3/kv/txn", body);
  if (!j.ok()) co_return j.error();
  auto it = j->find("succeeded");
  co_return it != j->end() && it->is_boolean() && it->get<bool>();
}

asio::awaitable<Result<bool>> EtcdClient::TxnIfAbsent(const std::string& guard_key,
                                                      std::vector<TxnOp> ops) {
  nlohmann::json cmp = {{"key", Base64Encode(guard_key)},
                        {"target", "CREATE"},
                        {"result", "EQUAL"},
                        {"create_revision", "0"}};
  co_return co_await Txn(std::move(cmp), std::move(ops));
}

asio::awaitable<Result<bool>> EtcdClient::TxnIfVersion(const std::string& guard_key,
                                                       int64_t version, std::vector<TxnOp> ops) {
  nlohmann::json cmp = {{"key", Base64Encode(guard_key)},
                        {"target", "VERSION"},
                        {"result", "EQUAL"},
                        {"version", std::to_string(version)}};
  co_return co_await Txn(std::move(cmp), std::move(ops));
}

}  // namespace hutch::cluster
