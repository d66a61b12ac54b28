#include "server/tls_setup.h"

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http/tls_context.h"

namespace hutch::server {

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
  auto issued = t->ca_->EnsureServerCert(ServerCertNames(opts.domain));
  if (!issued.ok()) return issued.error();
  auto ctx = api::MakeServerTlsContext(t->ca_->cert_path(), t->ca_->key_path());
  if (!ctx.ok()) return ctx.error().Context("hutchd's server certificate");
  t->ctx_ = std::move(ctx).value();
  return t;
}

Result<TlsCertificates::Context> TlsCertificates::Renew() {
  auto issued = ca_->EnsureServerCert(ServerCertNames(o_.domain));
  if (!issued.ok()) return issued.error();
  if (!*issued) return Context();
  auto ctx = api::MakeServerTlsContext(ca_->cert_path(), ca_->key_path());
  if (!ctx.ok()) return ctx.error().Context("hutchd's renewed certificate");
  ctx_ = *ctx;
  return ctx;
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
