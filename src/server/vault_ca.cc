#include "server/vault_ca.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/unique_fd.h"
#include "http/tls_context.h"

namespace hutch::server {

namespace {

// Long enough to outlive any sandbox; a leaf is remade with each hutchd.
constexpr std::chrono::hours kCaValidity(24 * 365 * 5);
constexpr std::chrono::hours kLeafValidity(24 * 90);

std::string PathOf(const std::string& dir, const std::string& id) {
  return dir + "/" + id + ".pem";
}

Status FromPem(const std::string& text, KeyAndCert* out) {
  const auto cut = text.find("-----BEGIN CERTIFICATE-----");
  if (cut == std::string::npos)
    return MakeError(Code::kInternal, "vault CA file has no certificate");
  auto key = ReadKeyPem(text.substr(0, cut));
  if (!key.ok()) return key.error();
  auto cert = ReadCertPem(text.substr(cut));
  if (!cert.ok()) return cert.error();
  out->key = std::move(key).value();
  out->cert = std::move(cert).value();
  return Status{};
}

Status WritePrivate(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return ErrnoError("create " + tmp, errno);
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      fsync(fd.get()) != 0)
    return ErrnoError("write " + tmp, errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("rename " + tmp, errno);
  return Status{};
}

}  // namespace

Result<std::shared_ptr<VaultCa>> VaultCa::LoadOrCreate(const std::string& dir,
                                                       const std::string& sandbox_id,
                                                       bool* created) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  const std::string path = PathOf(dir, sandbox_id);
  KeyAndCert kc;
  *created = false;
  if (std::ifstream in(path); in) {
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = FromPem(ss.str(), &kc);
    if (!r.ok()) return r.error().Context(path);
  } else {
    auto made = MakeCa("hutch vault CA " + sandbox_id, kCaValidity);
    if (!made.ok()) return made.error();
    kc = std::move(made).value();
    auto key = KeyPem(kc.key.get());
    auto cert = CertPem(kc.cert.get());
    if (!key.ok()) return key.error();
    if (!cert.ok()) return cert.error();
    if (auto st = WritePrivate(path, *key + *cert); !st.ok()) return st.error();
    *created = true;
  }
  auto pem = CertPem(kc.cert.get());
  if (!pem.ok()) return pem.error();
  return std::shared_ptr<VaultCa>(new VaultCa(std::move(kc), std::move(pem).value()));
}

void VaultCa::Remove(const std::string& dir, const std::string& sandbox_id) {
  std::error_code ec;
  std::filesystem::remove(PathOf(dir, sandbox_id), ec);
}

Result<std::shared_ptr<boost::asio::ssl::context>> VaultCa::ContextFor(const std::string& host) {
  if (auto it = leaves_.find(host); it != leaves_.end()) return it->second;
  if (!ValidCertName(host)) return MakeError(Code::kInvalidRequest, "not a certificate name");
  auto leaf = IssueServerCert(ca_, {host}, kLeafValidity);
  if (!leaf.ok()) return leaf.error();
  auto cert = CertPem(leaf->cert.get());
  auto key = KeyPem(leaf->key.get());
  if (!cert.ok()) return cert.error();
  if (!key.ok()) return key.error();
  auto ctx = api::MakeServerTlsContextPem(*cert, *key);
  if (!ctx.ok()) return ctx.error();
  leaves_[host] = *ctx;
  return *ctx;
}

}  // namespace hutch::server
