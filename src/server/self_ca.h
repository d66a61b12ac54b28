// hutchd's own CA, for --tls-listen without --tls-cert: a CA key and
// certificate made once under <state-dir>/tls/ (ca.pem is what clients
// trust; ca.key mode 0600), and the server certificate it signs
// (server.pem, server.key 0600) for the names hutchd answers to. The
// server certificate is reissued when it is missing, near its expiry,
// names other hosts (the domain changed) or was not signed by this CA;
// the CA itself is kept, so clients trust it once.
// Used by one thread at a time (hutchd's I/O thread).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"
#include "server/cert_maker.h"

namespace hutch::server {

struct CertPolicy {
  std::chrono::seconds ca_validity = std::chrono::hours(24 * 3650);
  std::chrono::seconds validity = std::chrono::hours(24 * 90);
  // A server certificate with less than this left is reissued.
  std::chrono::seconds renew_before = std::chrono::hours(24 * 30);
};

// The names of the server certificate: `domain` and `*.domain` (a
// sandbox's port is {port}-{id}.domain) when set, then localhost and the
// loopback addresses.
std::vector<std::string> ServerCertNames(const std::string& domain);

class SelfCa {
 public:
  // Loads the CA under `dir`, making the directory and the CA first when
  // there is none.
  static Result<SelfCa> Open(const std::string& dir, CertPolicy policy);

  // Makes sure server.pem covers exactly `names` and has more than
  // renew_before left, reissuing it otherwise. True when it reissued.
  Result<bool> EnsureServerCert(const std::vector<std::string>& names);
  // A server certificate for `names` kept in memory only (per-host
  // certificates picked by SNI), valid for policy().validity.
  Result<KeyAndCert> Issue(const std::vector<std::string>& names) const {
    return IssueServerCert(ca_, names, policy_.validity);
  }

  std::string ca_cert_path() const { return dir_ + "/ca.pem"; }
  std::string ca_key_path() const { return dir_ + "/ca.key"; }
  std::string cert_path() const { return dir_ + "/server.pem"; }
  std::string key_path() const { return dir_ + "/server.key"; }
  const CertPolicy& policy() const { return policy_; }

 private:
  SelfCa(std::string dir, CertPolicy policy, KeyAndCert ca)
      : dir_(std::move(dir)), policy_(policy), ca_(std::move(ca)) {}
  // Why the current server certificate must be replaced ("" if it need not).
  std::string ReissueReason(const std::vector<std::string>& names) const;

  std::string dir_;
  CertPolicy policy_;
  KeyAndCert ca_;
};

}  // namespace hutch::server
