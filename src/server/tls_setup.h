// The certificate hutchd's TLS listeners present: the operator's
// (--tls-cert/--tls-key, loaded once), or one from hutchd's own CA
// (SelfCa under <state-dir>/tls), checked at start and once a day and
// reissued before it expires. A reissued certificate becomes a new
// ssl::context handed to `swap` (HttpServer::SetTlsContext): connections
// accepted after it get the new one, open ones keep theirs.
//
// One more thing for the own CA: OpenSSL's verifier (Python's ssl, and
// so the Python SDKs) matches "*.D" only against labels of letters,
// digits and '-', and a sandbox's host {port}-sb_{hex}.D has a '_'. For
// a name of that form asked by SNI, a certificate for exactly that name
// is made in memory (kept until it is due like the server's, at most
// kMaxNamed of them).
// Lives on the I/O thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "http/tls_context.h"
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
  // SNI: a context for `name` when it is a sandbox's port host.
  Context ForName(std::string_view name);
  boost::asio::awaitable<void> RenewLoop();

  TlsOptions o_;
  std::optional<SelfCa> ca_;
  Context ctx_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::function<void(Context)> swap_;
  api::ServerNamePicker picker_;
  struct Named {
    Context ctx;
    std::chrono::system_clock::time_point made;
  };
  std::map<std::string, Named, std::less<>> named_;
  std::deque<std::string> named_order_;  // oldest first, for the bound
};

}  // namespace hutch::server
