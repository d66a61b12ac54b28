// One sandbox connection through the vault's egress proxy (vault_proxy.h):
// where it was going (the redirect's original destination), whether its
// TLS server name is bound, and then either a byte-for-byte splice
// (unbound: no interception) or the interposed HTTPS exchange that adds
// the credential to each request matching a binding. Messages are relayed
// as they arrive (a streamed response stays streamed).
// Runs on the I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "core/vault_book.h"
#include "server/vault_ca.h"

namespace hutch::server {

// The mark of the proxy's own upstream sockets: the redirect in the
// sandbox's namespace lets them through.
constexpr uint32_t kVaultUpstreamMark = 0x68757476;

struct VaultRelayEnv {
  std::string sandbox_id;
  VaultBook* book = nullptr;  // asked at each request
  std::shared_ptr<UniqueFd> netns;
  std::shared_ptr<VaultCa> ca;
  std::shared_ptr<boost::asio::ssl::context> upstream;
};

boost::asio::awaitable<void> ServeVaultConnection(boost::asio::ip::tcp::socket client,
                                                  VaultRelayEnv env);

}  // namespace hutch::server
