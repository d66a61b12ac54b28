// VaultProxy: the credential vault's egress proxy (issue 26;
// docs/security.md "Credential vault"). For each sandbox whose vault has
// bindings it owns:
//
// - a listener inside the sandbox's network namespace (127.0.0.1, an
//   ephemeral port) and an nftables table there (`ip hutch_vault`) whose
//   output hook redirects the sandbox's TCP connections to the bound ports
//   to that listener. The table lives in the sandbox's namespace, which
//   belongs to the host's user namespace: the sandbox's root cannot change
//   it. The proxy's own upstream connections are made from the same
//   namespace with a socket mark the redirect skips, so they leave by the
//   sandbox's veth and the host's policy for that sandbox decides what is
//   reachable exactly as for the sandbox's own traffic.
// - the sandbox's CA (vault_ca.h), put into its trust store when first made.
//
// Each connection (vault_relay.h) peeks at the TLS ClientHello: a host no
// binding names is passed through untouched; a bound one is terminated
// with a leaf of the sandbox's CA, the upstream TLS is verified against
// the host's trust store, and each request that matches a binding gets the
// credential, looked up at that request (a deleted binding or sandbox
// stops injection at once). Only HTTPS: over plain HTTP nothing proves the
// destination is the bound host, so bindings are https only.
// Runs on the I/O thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/unique_fd.h"
#include "core/sandbox_manager.h"
#include "core/vault_book.h"
#include "server/vault_ca.h"

namespace hutch::server {

struct VaultProxyOptions {
  std::string ca_dir;            // <state>/vault-ca
  std::string upstream_ca_file;  // trusted for upstreams besides the system's (tests)
  std::string nft;               // the nft binary
  std::string nsenter;           // runs nft inside a sandbox's namespace
};

class VaultProxy {
 public:
  VaultProxy(asio::io_context& io, VaultProxyOptions o, SandboxManager* mgr, VaultBook* book);
  ~VaultProxy();
  // The upstream TLS context (system trust + the extra CA file).
  Status Init();
  // VaultBook's change callback: arms, updates or disarms the sandbox.
  void OnVaultChange(const std::string& id);
  // At start, after VaultBook::Load: arms every sandbox with bindings and
  // removes CA files of sandboxes that are gone.
  void ArmAll();
  size_t armed() const { return armed_.size(); }
  // Returns once the sandbox's changes so far are applied, with the error
  // of the last attempt.
  asio::awaitable<Status> Settled(std::string id);

 private:
  struct Armed {
    std::shared_ptr<boost::asio::ip::tcp::acceptor> acceptor;
    std::shared_ptr<UniqueFd> netns;
    std::shared_ptr<VaultCa> ca;
    std::set<int> ports;
    int listen_port = 0;
  };
  asio::awaitable<void> SyncLoop(std::string id);
  asio::awaitable<Status> Sync(const std::string& id);
  asio::awaitable<Status> Arm(const std::string& id, const std::string& netns_path,
                              std::set<int> ports);
  asio::awaitable<void> Disarm(const std::string& id, bool gone);
  asio::awaitable<Status> ApplyRedirect(const std::string& netns_path, const std::string& script);
  asio::awaitable<Status> InstallCa(const std::string& id, const std::string& pem);
  asio::awaitable<void> AcceptLoop(std::string id,
                                   std::shared_ptr<boost::asio::ip::tcp::acceptor> a);

  asio::io_context& io_;
  VaultProxyOptions opts_;
  SandboxManager* mgr_;
  VaultBook* book_;
  std::shared_ptr<boost::asio::ssl::context> upstream_;
  std::map<std::string, Armed> armed_;
  std::map<std::string, std::string> netns_of_;  // armed sandbox -> its namespace path
  std::set<std::string> syncing_, dirty_;
  std::map<std::string, Error> failed_;  // the last sync's error, per sandbox
};

}  // namespace hutch::server
