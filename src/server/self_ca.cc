#include "server/self_ca.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/unique_fd.h"

namespace hutch::server {

namespace fs = std::filesystem;

namespace {

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError("reading " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `path` whole or not at all (a temp file renamed over it), with
// `mode` from its creation on: a key is never readable by others, not
// even for a moment.
Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return ErrnoError("creating " + tmp);
  if (fchmod(fd.get(), mode) != 0) return ErrnoError("chmod " + tmp);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd.get(), data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("writing " + tmp);
    off += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) return ErrnoError("fsync " + tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("renaming " + tmp);
  return {};
}

Status WritePair(const KeyAndCert& kc, const std::string& cert_path, const std::string& key_path) {
  auto key = KeyPem(kc.key.get());
  if (!key.ok()) return key.error();
  auto cert = CertPem(kc.cert.get());
  if (!cert.ok()) return cert.error();
  // The key first: a certificate on disk always has its key beside it.
  HUTCH_CHECK_OK(WriteFileAtomic(key_path, *key, 0600), "key");
  HUTCH_CHECK_OK(WriteFileAtomic(cert_path, *cert, 0644), "certificate");
  return {};
}

Result<KeyAndCert> ReadPair(const std::string& cert_path, const std::string& key_path) {
  auto cert_pem = ReadText(cert_path);
  if (!cert_pem.ok()) return cert_pem.error();
  auto key_pem = ReadText(key_path);
  if (!key_pem.ok()) return key_pem.error();
  auto cert = ReadCertPem(*cert_pem);
  if (!cert.ok()) return cert.error().Context(cert_path);
  auto key = ReadKeyPem(*key_pem);
  if (!key.ok()) return key.error().Context(key_path);
  return KeyAndCert{std::move(key).value(), std::move(cert).value()};
}

}  // namespace

std::vector<std::string> ServerCertNames(const std::string& domain) {
  std::vector<std::string> names;
  if (!domain.empty()) {
    names.push_back(domain);
    names.push_back("*." + domain);
  }
  for (const char* n : {"localhost", "127.0.0.1", "::1"}) names.emplace_back(n);
  return names;
}

Result<SelfCa> SelfCa::Open(const std::string& dir, CertPolicy policy) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return MakeError(Code::kInternal, "creating " + dir + ": " + ec.message());
  chmod(dir.c_str(), 0755);  // (ca.pem is for clients; the keys are 0600 themselves)
  SelfCa ca(dir, policy, {});
  if (!fs::exists(ca.ca_cert_path()) || !fs::exists(ca.ca_key_path())) {
    char host[256] = "hutchd";
    gethostname(host, sizeof host - 1);
    auto made = MakeCa("hutchd CA on " + std::string(host), policy.ca_validity);
    if (!made.ok()) return made.error().Context("hutchd's CA");
    HUTCH_CHECK_OK(WritePair(*made, ca.ca_cert_path(), ca.ca_key_path()), "hutchd's CA");
    spdlog::info("tls_ca_created path={}", ca.ca_cert_path());
  }
  auto loaded = ReadPair(ca.ca_cert_path(), ca.ca_key_path());
  if (!loaded.ok()) return loaded.error().Context("hutchd's CA");
  if (X509_check_private_key(loaded->cert.get(), loaded->key.get()) != 1)
    return MakeError(Code::kInternal, "hutchd's CA: " + ca.ca_key_path() + " is not the key of " +
                                          ca.ca_cert_path());
  ca.ca_ = std::move(loaded).value();
  return ca;
}

std::string SelfCa::ReissueReason(const std::vector<std::string>& names) const {
  auto current = ReadPair(cert_path(), key_path());
  if (!current.ok()) return "missing";
  X509* cert = current->cert.get();
  if (!SignedBy(cert, ca_)) return "other_ca";
  if (X509_check_private_key(cert, current->key.get()) != 1) return "key_mismatch";
  auto have = CertNames(cert), want = names;
  std::sort(have.begin(), have.end());
  std::sort(want.begin(), want.end());
  if (have != want) return "names_changed";
  if (NotAfter(cert) - std::chrono::system_clock::now() < policy_.renew_before) return "expiring";
  return "";
}

Result<bool> SelfCa::EnsureServerCert(const std::vector<std::string>& names) {
  const std::string why = ReissueReason(names);
  if (why.empty()) return false;
  auto issued = IssueServerCert(ca_, names, policy_.validity);
  if (!issued.ok()) return issued.error().Context("hutchd's server certificate");
  HUTCH_CHECK_OK(WritePair(*issued, cert_path(), key_path()), "hutchd's server certificate");
  const auto days = std::chrono::duration_cast<std::chrono::hours>(NotAfter(issued->cert.get()) -
                                                                   std::chrono::system_clock::now())
                        .count() /
                    24;
  spdlog::info("tls_cert_issued reason={} path={} days_valid={}", why, cert_path(), days);
  return true;
}

}  // namespace hutch::server
