#include "server/tls_setup.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cctype>

#include "http/tls_context.h"

namespace hutch::server {

namespace {

// Per-name certificates kept at most (each a key and a context, a few
// KiB): the sandboxes a host runs at once, with room.
constexpr size_t kMaxNamed = 1024;

// The label of `name` under ".domain" when it is a sandbox's port host,
// {port}-sb_{hex} (PortProxy::ParsePortHost's form), which "*.D" does not
// cover for OpenSSL because of its '_'; "" for any other name (nothing
// else gets a certificate of its own).
std::string SandboxHostLabel(std::string_view name, const std::string& domain) {
  if (domain.empty() || name.size() <= domain.size() + 1) return "";
  const size_t cut = name.size() - domain.size() - 1;
  if (name[cut] != '.' || name.substr(cut + 1) != domain) return "";
  std::string label(name.substr(0, cut));
  for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t dash = label.find("-sb_");
  if (dash == 0 || dash == std::string::npos || dash > 5 || label.size() > 63) return "";
  if (label.find_first_not_of("0123456789") < dash) return "";
  const size_t hex = dash + 4;
  if (hex == label.size() || label.find_first_not_of("0123456789abcdef", hex) != std::string::npos)
    return "";
  return label;
}

}  // namespace

Result<std::unique_ptr<TlsCertificates>> TlsCertificates::Load(TlsOptions o) {
  std::unique_ptr<TlsCertificates> t(new TlsCertificates(std::move(o)));
  const TlsOptions& opts = t->o_;
  if (!opts.cert_file.empty()) {
    auto ctx = api::MakeServerTlsContext(opts.cert_file, opts.key_file);
    if (!ctx.ok()) return ctx.error().Context("--tls-cert");
    t->ctx_ = std::move(ctx).value();
    return t;
  }
  auto ca = SelfCa::Open(opts.state_dir + "/tls", opts.policy);
  if (!ca.ok()) return ca.error();
  t->ca_.emplace(std::move(ca).value());
  t->picker_ = [raw = t.get()](std::string_view name) { return raw->ForName(name); };
  auto issued = t->ca_->EnsureServerCert(ServerCertNames(opts.domain));
  if (!issued.ok()) return issued.error();
  auto ctx = api::MakeServerTlsContext(t->ca_->cert_path(), t->ca_->key_path());
  if (!ctx.ok()) return ctx.error().Context("hutchd's server certificate");
  t->ctx_ = std::move(ctx).value();
  api::SetServerNamePicker(*t->ctx_, &t->picker_);
  return t;
}

Result<TlsCertificates::Context> TlsCertificates::Renew() {
  auto issued = ca_->EnsureServerCert(ServerCertNames(o_.domain));
  if (!issued.ok()) return issued.error();
  if (!*issued) return Context();
  auto ctx = api::MakeServerTlsContext(ca_->cert_path(), ca_->key_path());
  if (!ctx.ok()) return ctx.error().Context("hutchd's renewed certificate");
  ctx_ = *ctx;
  api::SetServerNamePicker(*ctx_, &picker_);
  return ctx;
}

TlsCertificates::Context TlsCertificates::ForName(std::string_view name) {
  const std::string label = SandboxHostLabel(name, o_.domain);
  if (label.empty()) return nullptr;
  const std::string host = label + "." + o_.domain;
  const auto now = std::chrono::system_clock::now();
  if (auto it = named_.find(host); it != named_.end()) {
    // Reissued at the age the server certificate would be.
    if (now - it->second.made < o_.policy.validity - o_.policy.renew_before) return it->second.ctx;
  }
  auto issued = ca_->Issue({host});
  if (!issued.ok()) {
    spdlog::error("tls_sni_cert_failed host={} err=\"{}\"", host, issued.error().message);
    return nullptr;
  }
  auto cert = CertPem(issued->cert.get());
  auto key = KeyPem(issued->key.get());
  if (!cert.ok() || !key.ok()) return nullptr;
  auto ctx = api::MakeServerTlsContextPem(*cert, *key);
  if (!ctx.ok()) {
    spdlog::error("tls_sni_cert_failed host={} err=\"{}\"", host, ctx.error().message);
    return nullptr;
  }
  if (named_.find(host) == named_.end()) named_order_.push_back(host);
  named_[host] = Named{*ctx, now};
  while (named_.size() > kMaxNamed) {
    named_.erase(named_order_.front());
    named_order_.pop_front();
  }
  return *ctx;
}

void TlsCertificates::StartRenewal(boost::asio::any_io_executor ex,
                                   std::function<void(Context)> swap) {
  if (!ca_) return;  // the operator renews their own certificate
  swap_ = std::move(swap);
  timer_ = std::make_unique<boost::asio::steady_timer>(ex);
  boost::asio::co_spawn(ex, RenewLoop(), boost::asio::detached);
}

boost::asio::awaitable<void> TlsCertificates::RenewLoop() {
  for (;;) {
    timer_->expires_after(o_.check_every);
    boost::system::error_code ec;
    co_await timer_->async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (ec) co_return;
    auto ctx = Renew();
    // (An error keeps the current certificate; the next check retries.)
    if (!ctx.ok()) spdlog::error("tls_renew_failed err=\"{}\"", ctx.error().message);
    else if (*ctx) swap_(*ctx);
  }
}

}  // namespace hutch::server
