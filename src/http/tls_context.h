// The server side of TLS: an ssl::context from a PEM certificate (chain
// allowed) and its private key, with hutchd's policy: TLS 1.2 and 1.3
// only, forward-secret AEAD ciphers, no renegotiation or compression, and
// ALPN http/1.1 (the only protocol hutchd speaks). A context is immutable
// once made; a renewed certificate is a new context (HttpServer swaps it
// for new connections).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/result.h"

namespace hutch::api {

Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file);

}  // namespace hutch::api
