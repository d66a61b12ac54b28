// hutchd's own CA (src/server/cert_maker, self_ca), root-free: what the
// certificates say (names, validity, key usage), that a server
// certificate chains to its CA under OpenSSL's own verifier and to no
// other, and when SelfCa keeps or reissues the one on disk.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/cert_maker.h"
#include "server/self_ca.h"

namespace hutch::server {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using std::chrono::system_clock;

struct StoreFree {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};

// OpenSSL's verdict on `cert` for `host` (empty: no name check) with
// only `ca` trusted; X509_V_OK when a client would accept it.
int Verify(X509* cert, X509* ca, const std::string& host = "") {
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), ca);
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (!host.empty()) {
    unsigned char ip[16];
    if (inet_pton(AF_INET, host.c_str(), ip) == 1 || inet_pton(AF_INET6, host.c_str(), ip) == 1)
      X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
    else X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  X509_verify_cert(ctx.get());
  return X509_STORE_CTX_get_error(ctx.get());
}

KeyAndCert Ca() {
  auto ca = MakeCa("test CA", hours(24 * 365));
  EXPECT_TRUE(ca.ok()) << ca.error().message;
  return std::move(ca).value();
}

KeyAndCert Server(const KeyAndCert& ca, const std::vector<std::string>& names,
                  seconds validity = hours(24 * 90)) {
  auto c = IssueServerCert(ca, names, validity);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return std::move(c).value();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CertMaker, CaSignsCertificatesAndNothingElse) {
  KeyAndCert ca = Ca();
  X509* x = ca.cert.get();
  EXPECT_EQ(X509_check_ca(x), 1);
  const uint32_t ku = X509_get_key_usage(x);
  EXPECT_EQ(ku, static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_EQ(X509_get_pathlen(x), 0);
  EXPECT_EQ(X509_check_issued(x, x), X509_V_OK);  // self-signed
  EXPECT_EQ(X509_verify(x, X509_get0_pubkey(x)), 1);
}

TEST(CertMaker, ServerCertCoversDomainWildcardAndLoopback) {
  KeyAndCert ca = Ca();
  KeyAndCert srv = Server(ca, ServerCertNames("sandbox.test"));
  X509* x = srv.cert.get();
  EXPECT_EQ(CertNames(x), (std::vector<std::string>{"sandbox.test", "*.sandbox.test", "localhost",
                                                    "127.0.0.1", "::1"}));
  for (const char* ok : {"sandbox.test", "49983-abc.sandbox.test", "localhost", "127.0.0.1", "::1"})
    EXPECT_EQ(Verify(x, ca.cert.get(), ok), X509_V_OK) << ok;
  // OpenSSL's verifier (Python's ssl) matches a wildcard against letters,
  // digits and '-' only, so "*.D" does not cover a label with hutch's
  // "sb_" ids (curl's and Go's own matching do).
  EXPECT_EQ(Verify(x, ca.cert.get(), "49983-sb_abc.sandbox.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  // A certificate for exactly that name verifies (what hutchd presents
  // by SNI for it).
  KeyAndCert exact = Server(ca, {"49983-sb_abc.sandbox.test"});
  EXPECT_EQ(Verify(exact.cert.get(), ca.cert.get(), "49983-sb_abc.sandbox.test"), X509_V_OK);
  // A wildcard covers one label, and nothing outside the domain.
  for (const char* bad : {"a.b.sandbox.test", "other.example.invalid", "sandbox.testx", "10.0.0.1"})
    EXPECT_NE(Verify(x, ca.cert.get(), bad), X509_V_OK) << bad;
}

TEST(CertMaker, ServerCertWithoutDomainCoversOnlyLoopback) {
  KeyAndCert ca = Ca();
  KeyAndCert srv = Server(ca, ServerCertNames(""));
  EXPECT_EQ(CertNames(srv.cert.get()), (std::vector<std::string>{"localhost", "127.0.0.1", "::1"}));
  EXPECT_NE(Verify(srv.cert.get(), ca.cert.get(), "sandbox.test"), X509_V_OK);
}

TEST(CertMaker, ServerCertIsALeafForServerAuthOnly) {
  KeyAndCert ca = Ca();
  KeyAndCert srv = Server(ca, {"localhost"});
  X509* x = srv.cert.get();
  EXPECT_EQ(X509_check_ca(x), 0);
  EXPECT_EQ(X509_get_key_usage(x), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(X509_get_extended_key_usage(x), static_cast<uint32_t>(XKU_SSL_SERVER));
}

TEST(CertMaker, ValidityRunsFromAnHourAgoForTheGivenTime) {
  KeyAndCert ca = Ca();
  KeyAndCert srv = Server(ca, {"localhost"}, hours(24 * 90));
  const auto left = NotAfter(srv.cert.get()) - system_clock::now();
  EXPECT_GT(left, hours(24 * 90) - hours(1));
  EXPECT_LE(left, hours(24 * 90));
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(srv.cert.get())), 0);
}

TEST(CertMaker, ChainsToItsCaOnly) {
  KeyAndCert ca = Ca(), other = Ca();
  KeyAndCert srv = Server(ca, {"localhost"});
  EXPECT_EQ(Verify(srv.cert.get(), ca.cert.get(), "localhost"), X509_V_OK);
  EXPECT_NE(Verify(srv.cert.get(), other.cert.get(), "localhost"), X509_V_OK);
  EXPECT_TRUE(SignedBy(srv.cert.get(), ca));
  EXPECT_FALSE(SignedBy(srv.cert.get(), other));
}

TEST(CertMaker, ExpiredCertificateIsRefused) {
  KeyAndCert ca = Ca();
  KeyAndCert srv = Server(ca, {"localhost"}, seconds(-60));
  EXPECT_EQ(Verify(srv.cert.get(), ca.cert.get(), "localhost"), X509_V_ERR_CERT_HAS_EXPIRED);
}

TEST(CertMaker, PemRoundTrips) {
  KeyAndCert ca = Ca();
  auto pem = CertPem(ca.cert.get());
  auto key = KeyPem(ca.key.get());
  ASSERT_TRUE(pem.ok() && key.ok());
  auto back = ReadCertPem(*pem);
  auto kback = ReadKeyPem(*key);
  ASSERT_TRUE(back.ok() && kback.ok());
  EXPECT_EQ(X509_cmp(back->get(), ca.cert.get()), 0);
  EXPECT_EQ(X509_check_private_key(back->get(), kback->get()), 1);
  EXPECT_FALSE(ReadCertPem("not a certificate").ok());
}

TEST(CertMaker, RefusesNamesThatCannotBeCertificateNames) {
  KeyAndCert ca = Ca();
  for (const char* bad : {"", "a,DNS:evil.com", "a b", "*.", "a..b", ".a", "-a", "a/b"}) {
    EXPECT_FALSE(ValidCertName(bad)) << bad;
    EXPECT_FALSE(IssueServerCert(ca, {bad}, hours(1)).ok()) << bad;
  }
  for (const char* ok : {"sandbox.test", "*.sandbox.test", "::1", "127.0.0.1", "localhost",
                         "49983-sb_0a.sandbox.test"})
    EXPECT_TRUE(ValidCertName(ok)) << ok;
}

class SelfCaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-selfca-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string TlsDir() const { return dir_ + "/tls"; }
  X509Ptr CertAt(const std::string& path) {
    auto c = ReadCertPem(ReadAll(path));
    EXPECT_TRUE(c.ok());
    return c.ok() ? std::move(c).value() : X509Ptr();
  }
  std::string dir_;
};

TEST_F(SelfCaTest, MakesTheCaOnceWithPrivateKeys) {
  auto ca = SelfCa::Open(TlsDir(), {});
  ASSERT_TRUE(ca.ok()) << ca.error().message;
  ASSERT_TRUE(ca->EnsureServerCert(ServerCertNames("sandbox.test")).ok());
  struct stat st {};
  for (const auto& key : {ca->ca_key_path(), ca->key_path()}) {
    ASSERT_EQ(stat(key.c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  const std::string first = ReadAll(ca->ca_cert_path());
  auto again = SelfCa::Open(TlsDir(), {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ReadAll(again->ca_cert_path()), first);  // the same CA: clients trust it once
}

TEST_F(SelfCaTest, KeepsAValidCertificateAndReissuesWhenDue) {
  CertPolicy short_lived;
  short_lived.validity = hours(2);
  auto ca = SelfCa::Open(TlsDir(), short_lived);
  ASSERT_TRUE(ca.ok());
  const auto names = ServerCertNames("sandbox.test");
  auto issued = ca->EnsureServerCert(names);
  ASSERT_TRUE(issued.ok());
  EXPECT_TRUE(*issued);
  // Two hours left, renewal at 30 days: due at once.
  CertPolicy normal;
  auto ca2 = SelfCa::Open(TlsDir(), normal);
  ASSERT_TRUE(ca2.ok());
  X509Ptr old_cert = CertAt(ca2->cert_path());
  auto renewed = ca2->EnsureServerCert(names);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
  X509Ptr new_cert = CertAt(ca2->cert_path());
  EXPECT_NE(X509_cmp(old_cert.get(), new_cert.get()), 0);
  EXPECT_GT(NotAfter(new_cert.get()) - system_clock::now(), hours(24 * 89));
  X509Ptr ca_cert = CertAt(ca2->ca_cert_path());
  EXPECT_EQ(Verify(new_cert.get(), ca_cert.get(), "49983-x.sandbox.test"), X509_V_OK);
  // Now far from expiry: kept.
  auto kept = ca2->EnsureServerCert(names);
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(*kept);
}

TEST_F(SelfCaTest, ReissuesWhenTheDomainChanges) {
  auto ca = SelfCa::Open(TlsDir(), {});
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE(ca->EnsureServerCert(ServerCertNames("a.test")).ok());
  auto changed = ca->EnsureServerCert(ServerCertNames("b.test"));
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  X509Ptr cert = CertAt(ca->cert_path());
  X509Ptr ca_cert = CertAt(ca->ca_cert_path());
  EXPECT_EQ(Verify(cert.get(), ca_cert.get(), "1-x.b.test"), X509_V_OK);
  EXPECT_NE(Verify(cert.get(), ca_cert.get(), "1-x.a.test"), X509_V_OK);
}

TEST_F(SelfCaTest, ReissuesACertificateOfAnotherCa) {
  auto ca = SelfCa::Open(TlsDir(), {});
  ASSERT_TRUE(ca.ok());
  const auto names = ServerCertNames("");
  ASSERT_TRUE(ca->EnsureServerCert(names).ok());
  // Someone put another CA's certificate in place.
  KeyAndCert stranger = Ca();
  KeyAndCert foreign = Server(stranger, names);
  {
    std::ofstream(ca->cert_path()) << CertPem(foreign.cert.get()).value();
    std::ofstream(ca->key_path()) << KeyPem(foreign.key.get()).value();
  }
  auto again = ca->EnsureServerCert(names);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again);
  X509Ptr cert = CertAt(ca->cert_path());
  X509Ptr ca_cert = CertAt(ca->ca_cert_path());
  EXPECT_EQ(Verify(cert.get(), ca_cert.get(), "localhost"), X509_V_OK);
}

}  // namespace
}  // namespace hutch::server
