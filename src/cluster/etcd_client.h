// A small etcd v3 client over etcd's JSON gateway (/v3/*, etcd 3.4), on
// Beast and C++20 coroutines: no gRPC stack. Keys and values are base64 on
// the wire and plain strings here; int64s travel as JSON strings.
//
// One connection per call (calls are rare: a lease keepalive every few
// seconds, a record per create): nothing to pool or to reconnect. The
// endpoints are tried in order, so a cluster of three etcd members keeps
// answering while one of them is down. https:// endpoints are spoken over
// TLS (OpenSSL through Beast): the member's certificate is checked against
// the given CA (else the system's) and its name against the URL's host,
// and a client certificate is presented when given (etcd's
// --client-cert-auth). Lives on the I/O thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hutch::cluster {

namespace asio = boost::asio;

struct KeyValue {
  std::string key;
  std::string value;
  int64_t lease = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
};

// One operation of a transaction's success branch.
struct TxnOp {
  enum class Kind { kPut, kDelete } kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t lease = 0;
};

// PEM files for https:// endpoints (each optional: no CA → the system's
// trust store; no cert/key → no client certificate).
struct EtcdTls {
  std::string ca, cert, key;
};

class EtcdClient {
 public:
  // `endpoints`: "http://HOST:PORT", "https://HOST:PORT" (or "HOST:PORT")
  // of etcd members.
  EtcdClient(asio::any_io_executor ex, std::vector<std::string> endpoints, EtcdTls tls = {});

  // "http://a:2379,https://b:2379" → endpoints; invalid_request when empty
  // or of another scheme.
  static Result<std::vector<std::string>> ParseEndpoints(const std::string& list);
  // Whether the TLS files load (checked at start, before anything runs).
  static Status CheckTls(const EtcdTls& tls);

  // A lease of `ttl` seconds; its id.
  asio::awaitable<Result<int64_t>> Grant(int64_t ttl);
  // Refreshes the lease; its remaining TTL (0: it expired, gone for good).
  asio::awaitable<Result<int64_t>> KeepAlive(int64_t lease);
  asio::awaitable<Status> Revoke(int64_t lease);
  // `lease` 0: the key lives until deleted.
  asio::awaitable<Status> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  asio::awaitable<Result<std::optional<KeyValue>>> Get(const std::string& key);
  // Every key starting with `prefix`.
  asio::awaitable<Result<std::vector<KeyValue>>> Prefix(const std::string& prefix);
  asio::awaitable<Status> Delete(const std::string& key);
  // The `ops` only if `guard_key` does not exist (create_revision == 0);
  // false when it existed (nothing was done).
  asio::awaitable<Result<bool>> TxnIfAbsent(const std::string& guard_key, std::vector<TxnOp> ops);
  // The `ops` only if `guard_key`'s version is `version` (0: absent);
  // false when another writer changed it first (optimistic concurrency).
  asio::awaitable<Result<bool>> TxnIfVersion(const std::string& guard_key, int64_t version,
                                             std::vector<TxnOp> ops);

  // How long one call may take, connect included.
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  // POSTs `body` to `path` on the first endpoint that answers 200.
  asio::awaitable<Result<nlohmann::json>> Call(const std::string& path, const nlohmann::json& body);
  struct Endpoint {
    std::string host, port;
    bool tls = false;
  };
  asio::awaitable<Result<nlohmann::json>> CallOne(const Endpoint& ep, const std::string& path,
                                                  const std::string& body);
  asio::awaitable<Result<bool>> Txn(nlohmann::json compare, std::vector<TxnOp> ops);

  asio::any_io_executor ex_;
  std::vector<Endpoint> endpoints_;
  // For https:// endpoints (null when none is); tls_error_ when the files
  // did not load.
  std::shared_ptr<asio::ssl::context> ssl_;
  std::string tls_error_;
  size_t preferred_ = 0;  // the member that answered last
  std::chrono::milliseconds timeout_{3000};
};

}  // namespace hutch::cluster
