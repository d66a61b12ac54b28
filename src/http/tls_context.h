// The server side of TLS: an ssl::context from a PEM certificate (chain
// allowed) and its private key, with hutchd's policy: TLS 1.2 and 1.3
// only, forward-secret AEAD ciphers, no renegotiation or compression, and
// ALPN http/1.1 (the only protocol hutchd speaks). A context is immutable
// once made; a renewed certificate is a new context (HttpServer swaps it
// for new connections).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hutch::api {

Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file);
// The same from PEM text (a certificate made in memory).
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContextPem(
    const std::string& cert_pem, const std::string& key_pem);

// Server Name Indication: during a handshake on `ctx`, `pick(name)` may
// answer another context (another certificate) for the host name the
// client asked for; nullptr keeps `ctx`'s. Runs on the I/O thread;
// `pick` must outlive `ctx` and every connection made with it.
using ServerNamePicker =
    std::function<std::shared_ptr<boost::asio::ssl::context>(std::string_view name)>;
void SetServerNamePicker(boost::asio::ssl::context& ctx, ServerNamePicker* pick);

}  // namespace hutch::api
