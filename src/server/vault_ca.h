// VaultCa: one sandbox's own certificate authority for the vault's egress
// proxy (vault_proxy.h). Its certificate is in the sandbox's trust store;
// its key never leaves hutchd (a 0600 file under <state>/vault-ca, so a
// restarted hutchd keeps serving the sandboxes it adopts). It signs a leaf
// certificate per bound host name the sandbox connects to, made on first
// use and kept in memory. One CA per sandbox: a sandbox trusts only its
// own, so nothing one sandbox learns lets it pass for a host to another.
// Runs on the I/O thread only.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <string>

#include "common/result.h"
#include "server/cert_maker.h"

namespace hutch::server {

class VaultCa {
 public:
  // Reads <dir>/<sandbox_id>.pem (key then certificate), or makes and
  // writes it (mode 0600). `created` says which.
  static Result<std::shared_ptr<VaultCa>> LoadOrCreate(const std::string& dir,
                                                       const std::string& sandbox_id,
                                                       bool* created);
  // Removes the sandbox's CA file (its sandbox is gone).
  static void Remove(const std::string& dir, const std::string& sandbox_id);

  const std::string& cert_pem() const { return cert_pem_; }
  // The server context presenting a leaf for `host` (a normalized name).
  Result<std::shared_ptr<boost::asio::ssl::context>> ContextFor(const std::string& host);

 private:
  explicit VaultCa(KeyAndCert ca, std::string cert_pem)
      : ca_(std::move(ca)), cert_pem_(std::move(cert_pem)) {}
  KeyAndCert ca_;
  std::string cert_pem_;
  std::map<std::string, std::shared_ptr<boost::asio::ssl::context>> leaves_;
};

}  // namespace hutch::server
