#include "http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace hutch::api {

namespace ssl = boost::asio::ssl;

namespace {

// TLS 1.2 suites (1.3's are all AEAD and forward-secret already).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// The oldest error OpenSSL queued, as text (and the queue emptied).
std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// ALPN: http/1.1 when the client offers it; a client offering only
// others (h2) goes on without ALPN rather than failing the handshake.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kOurs[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kOurs, sizeof kOurs, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

int OnServerName(SSL* ssl, int*, void* arg) {
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr || arg == nullptr) return SSL_TLSEXT_ERR_OK;
  auto other = (*static_cast<ServerNamePicker*>(arg))(name);
  // (The SSL takes a reference on the new SSL_CTX: it outlives `other`.)
  if (other) SSL_set_SSL_CTX(ssl, other->native_handle());
  return SSL_TLSEXT_ERR_OK;
}

// hutchd's policy on a new context (its certificate comes after).
Result<std::shared_ptr<ssl::context>> NewContext() {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* h = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION) != 1)
    return MakeError(Code::kInternal, "TLS minimum version: " + OpenSslError());
  SSL_CTX_set_options(h, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                             SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_SINGLE_DH_USE);
  if (SSL_CTX_set_cipher_list(h, kTls12Ciphers) != 1)
    return MakeError(Code::kInternal, "TLS cipher list: " + OpenSslError());
  SSL_CTX_set_alpn_select_cb(h, SelectAlpn, nullptr);
  return ctx;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerTlsContext(const std::string& cert_file,
                                                           const std::string& key_file) {
  auto ctx = NewContext();
  if (!ctx.ok()) return ctx.error();
  SSL_CTX* h = (*ctx)->native_handle();
  if (SSL_CTX_use_certificate_chain_file(h, cert_file.c_str()) != 1)
    return MakeError(Code::kInvalidRequest, "TLS certificate " + cert_file + ": " + OpenSslError());
  if (SSL_CTX_use_PrivateKey_file(h, key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return MakeError(Code::kInvalidRequest, "TLS key " + key_file + ": " + OpenSslError());
  if (SSL_CTX_check_private_key(h) != 1)
    return MakeError(Code::kInvalidRequest, "TLS key " + key_file + " does not match certificate " +
                                                cert_file + ": " + OpenSslError());
  return ctx;
}

Result<std::shared_ptr<ssl::context>> MakeServerTlsContextPem(const std::string& cert_pem,
                                                              const std::string& key_pem) {
  auto ctx = NewContext();
  if (!ctx.ok()) return ctx.error();
  boost::system::error_code ec;
  (*ctx)->use_certificate_chain(boost::asio::buffer(cert_pem), ec);
  if (!ec) (*ctx)->use_private_key(boost::asio::buffer(key_pem), ssl::context::pem, ec);
  if (ec) return MakeError(Code::kInternal, "TLS certificate from memory: " + ec.message());
  if (SSL_CTX_check_private_key((*ctx)->native_handle()) != 1)
    return MakeError(Code::kInternal, "TLS key does not match its certificate: " + OpenSslError());
  return ctx;
}

void SetServerNamePicker(ssl::context& ctx, ServerNamePicker* pick) {
  SSL_CTX_set_tlsext_servername_callback(ctx.native_handle(), OnServerName);
  SSL_CTX_set_tlsext_servername_arg(ctx.native_handle(), pick);
}

}  // namespace hutch::api
