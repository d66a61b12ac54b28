// The certificate hutchd's TLS listeners present: the operator's
// (--tls-cert/--tls-key, loaded once), or one from hutchd's own CA
// (SelfCa under <state-dir>/tls), checked at start and once a day and
// reissued before it expires. A reissued certificate becomes a new
// ssl::context handed to `swap` (HttpServer::SetTlsContext): connections
// accepted after it get the new one, open ones keep theirs.
// Lives on the I/O thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "server/self_ca.h"

namespace hutch::server {

struct TlsOptions {
  std::string cert_file, key_file;  // both or neither
  std::string state_dir;
  std::string domain;  // --domain: the names of the own CA's certificate
  CertPolicy policy;
  std::chrono::seconds check_every = std::chrono::hours(24);
};

class TlsCertificates {
 public:
  using Context = std::shared_ptr<boost::asio::ssl::context>;

  static Result<std::unique_ptr<TlsCertificates>> Load(TlsOptions o);

  const Context& context() const { return ctx_; }
  // The CA certificate clients trust; empty with the operator's files.
  std::string ca_path() const { return ca_ ? ca_->ca_cert_path() : std::string(); }
  // Own CA only: rechecks every check_every and calls `swap` after
  // reissuing. Stops with the executor's io_context.
  void StartRenewal(boost::asio::any_io_executor ex, std::function<void(Context)> swap);

 private:
  explicit TlsCertificates(TlsOptions o) : o_(std::move(o)) {}
  // Reissues when due; the new context when it did, else nullptr.
  Result<Context> Renew();
  boost::asio::awaitable<void> RenewLoop();

  TlsOptions o_;
  std::optional<SelfCa> ca_;
  Context ctx_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::function<void(Context)> swap_;
};

}  // namespace hutch::server
