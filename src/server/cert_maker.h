// Keys and X.509 certificates for hutchd's own CA (SelfCa): an ECDSA P-256
// key, a self-signed CA certificate, and server certificates it signs
// for a list of DNS names and IP addresses. OpenSSL objects are held by
// unique_ptr with their free functions, so no path leaks one.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace hutch::server {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

struct KeyAndCert {
  PkeyPtr key;
  X509Ptr cert;
};

// A CA: a new key and a self-signed certificate (CA:TRUE, path length 0,
// keyCertSign and cRLSign only) valid from an hour ago (clock skew) for
// `validity`.
Result<KeyAndCert> MakeCa(const std::string& common_name, std::chrono::seconds validity);

// A server certificate signed by `ca` for `names` (DNS names, "*.D"
// wildcards, IPv4 or IPv6 literals): subjectAltName lists them all, the
// subject's CN is the first; CA:FALSE, digitalSignature, serverAuth only.
Result<KeyAndCert> IssueServerCert(const KeyAndCert& ca, const std::vector<std::string>& names,
                                   std::chrono::seconds validity);

// Whether `name` may go into a certificate: a DNS name of letters,
// digits, '-', '_' (hutch's sandbox ids: not a hostname character, but
// verifiers compare an exact name as it is) and '.', an optional "*."
// first label, or an IP literal.
bool ValidCertName(const std::string& name);

// PEM text of a certificate or an (unencrypted) private key, and back.
Result<std::string> CertPem(X509* cert);
Result<std::string> KeyPem(EVP_PKEY* key);
Result<X509Ptr> ReadCertPem(const std::string& pem);
Result<PkeyPtr> ReadKeyPem(const std::string& pem);

// The subjectAltName entries of `cert` as text ("*.sandbox.test",
// "127.0.0.1", "::1"), in certificate order.
std::vector<std::string> CertNames(X509* cert);
// When `cert` stops being valid.
std::chrono::system_clock::time_point NotAfter(X509* cert);
// Whether `cert` was signed by `ca`'s key.
bool SignedBy(X509* cert, const KeyAndCert& ca);

}  // namespace hutch::server
