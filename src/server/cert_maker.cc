#include "server/cert_maker.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <ctime>

namespace hutch::server {

namespace {

struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// Certificates start an hour in the past: a client whose clock is a
// little behind must not see a certificate that is not valid yet.
constexpr long kBackdateSeconds = 3600;

Error SslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  char buf[256] = "unknown OpenSSL error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  return MakeError(Code::kInternal, what + ": " + buf);
}

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

Result<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return SslError("generating a P-256 key");
  return key;
}

// A random positive 127-bit serial (RFC 5280: unique per CA, at most 20
// octets; random so two CAs' certificates never collide either).
Status SetRandomSerial(X509* x) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return SslError("random serial");
  bytes[0] &= 0x7f;
  std::unique_ptr<BIGNUM, BnFree> bn(BN_bin2bn(bytes, sizeof bytes, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x))) return SslError("serial");
  return {};
}

// The skeleton shared by both kinds: version 3, serial, validity,
// subject CN, public key.
Result<X509Ptr> NewCert(EVP_PKEY* key, const std::string& cn, std::chrono::seconds validity) {
  X509Ptr x(X509_new());
  if (!x) return SslError("X509_new");
  if (X509_set_version(x.get(), 2) != 1) return SslError("certificate version");
  HUTCH_CHECK_OK(SetRandomSerial(x.get()), "certificate");
  if (!X509_gmtime_adj(X509_getm_notBefore(x.get()), -kBackdateSeconds) ||
      !X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(validity.count())))
    return SslError("certificate validity");
  X509_NAME* name = X509_get_subject_name(x.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1)
    return SslError("certificate subject");
  if (X509_set_pubkey(x.get(), key) != 1) return SslError("certificate key");
  return x;
}

// Adds one extension written in OpenSSL's config syntax, with `issuer`
// (itself for a self-signed certificate) for the key identifiers.
Status AddExt(X509* x, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1)
    return SslError(std::string("certificate extension ") + OBJ_nid2sn(nid) + "=" + value);
  return {};
}

}  // namespace

bool ValidCertName(const std::string& name) {
  if (IsIp(name)) return true;
  std::string host = name;
  if (host.rfind("*.", 0) == 0) host = host.substr(2);
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.back() == '.' ||
      host.front() == '-')
    return false;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return host.find("..") == std::string::npos;
}

Result<KeyAndCert> MakeCa(const std::string& common_name, std::chrono::seconds validity) {
  auto key = NewKey();
  if (!key.ok()) return key.error();
  auto cert = NewCert(key->get(), common_name, validity);
  if (!cert.ok()) return cert.error();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) return SslError("CA issuer");
  HUTCH_CHECK_OK(AddExt(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"), "CA");
  HUTCH_CHECK_OK(AddExt(x, x, NID_key_usage, "critical,keyCertSign,cRLSign"), "CA");
  HUTCH_CHECK_OK(AddExt(x, x, NID_subject_key_identifier, "hash"), "CA");
  if (X509_sign(x, key->get(), EVP_sha256()) == 0) return SslError("signing the CA certificate");
  return KeyAndCert{std::move(key).value(), std::move(cert).value()};
}

Result<KeyAndCert> IssueServerCert(const KeyAndCert& ca, const std::vector<std::string>& names,
                                   std::chrono::seconds validity) {
  if (names.empty()) return MakeError(Code::kInvalidRequest, "a certificate needs a name");
  std::string san;
  for (const auto& n : names) {
    if (!ValidCertName(n))
      return MakeError(Code::kInvalidRequest, "'" + n + "' cannot be a certificate name");
    san += (san.empty() ? "" : ",") + std::string(IsIp(n) ? "IP:" : "DNS:") + n;
  }
  auto key = NewKey();
  if (!key.ok()) return key.error();
  auto cert = NewCert(key->get(), names.front(), validity);
  if (!cert.ok()) return cert.error();
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(ca.cert.get())) != 1)
    return SslError("certificate issuer");
  X509* issuer = ca.cert.get();
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_basic_constraints, "critical,CA:FALSE"), "certificate");
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_key_usage, "critical,digitalSignature"), "certificate");
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_ext_key_usage, "serverAuth"), "certificate");
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_subject_key_identifier, "hash"), "certificate");
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_authority_key_identifier, "keyid:always"), "certificate");
  HUTCH_CHECK_OK(AddExt(x, issuer, NID_subject_alt_name, san), "certificate");
  if (X509_sign(x, ca.key.get(), EVP_sha256()) == 0) return SslError("signing the certificate");
  return KeyAndCert{std::move(key).value(), std::move(cert).value()};
}

Result<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return SslError("certificate PEM");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return SslError("key PEM");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<X509Ptr> ReadCertPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr x(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!x) return SslError("reading a PEM certificate");
  return x;
}

Result<PkeyPtr> ReadKeyPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr k(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!k) return SslError("reading a PEM key");
  return k;
}

std::vector<std::string> CertNames(X509* cert) {
  std::vector<std::string> out;
  std::unique_ptr<GENERAL_NAMES, NamesFree> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      const ASN1_IA5STRING* s = g->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (g->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = g->d.iPAddress;
      const int len = ASN1_STRING_length(s);
      char text[INET6_ADDRSTRLEN] = "";
      if (len == 4 || len == 16)
        inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof text);
      out.emplace_back(text);
    }
  }
  return out;
}

std::chrono::system_clock::time_point NotAfter(X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

bool SignedBy(X509* cert, const KeyAndCert& ca) {
  if (X509_check_issued(ca.cert.get(), cert) != X509_V_OK) return false;
  const bool ok = X509_verify(cert, ca.key.get()) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace hutch::server
