#include "server/vault_proxy.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>

#include "common/netns_socket.h"
#include "common/subprocess.h"
#include "core/file_ops.h"
#include "server/vault_relay.h"

namespace hutch::server {

using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kNftTimeout = std::chrono::seconds(10);
constexpr int kBacklog = 128;
// The sandbox's system bundle: curl, Python's ssl, Go and OpenSSL read it;
// the variables below point Python requests, Node and curl builds with
// their own store at it too.
constexpr char kBundle[] = "/etc/ssl/certs/ca-certificates.crt";
constexpr int64_t kBundleMax = 8 << 20;

// The redirect of the sandbox's connections to the bound ports, in a table
// of its own namespace. Replaced whole: declare, delete, make.
std::string RedirectScript(const std::set<int>& ports, int listen_port) {
  std::string list;
  for (int p : ports) list += (list.empty() ? "" : ", ") + std::to_string(p);
  return "table ip hutch_vault\ndelete table ip hutch_vault\n"
         "table ip hutch_vault {\n"
         "  chain out {\n"
         "    type nat hook output priority -100; policy accept;\n"
         "    meta mark " +
         std::to_string(kVaultUpstreamMark) +
         " return\n"
         "    ip daddr 127.0.0.0/8 return\n"
         "    tcp dport { " +
         list + " } redirect to :" + std::to_string(listen_port) +
         "\n"
         "  }\n"
         "}\n";
}

const char* const kRemoveScript = "table ip hutch_vault\ndelete table ip hutch_vault\n";

std::set<int> BoundPorts(const vault::Vault* v) {
  std::set<int> ports;
  if (v)
    for (const auto& [name, b] : v->bindings) ports.insert(b.match.port);
  return ports;
}

}  // namespace

VaultProxy::VaultProxy(asio::io_context& io, VaultProxyOptions o, SandboxManager* mgr,
                       VaultBook* book)
    : io_(io), opts_(std::move(o)), mgr_(mgr), book_(book) {}

VaultProxy::~VaultProxy() {
  book_->SetOnChange(nullptr);
  for (auto& [id, a] : armed_) {
    error_code ec;
    a.acceptor->close(ec);
  }
}

Status VaultProxy::Init() {
  upstream_ = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  error_code ec;
  upstream_->set_default_verify_paths(ec);
  if (ec) return MakeError(Code::kInternal, "vault upstream trust: " + ec.message());
  if (!opts_.upstream_ca_file.empty()) {
    upstream_->load_verify_file(opts_.upstream_ca_file, ec);
    if (ec)
      return MakeError(Code::kInvalidRequest,
                       "--vault-upstream-ca " + opts_.upstream_ca_file + ": " + ec.message());
  }
  SSL_CTX_set_min_proto_version(upstream_->native_handle(), TLS1_2_VERSION);
  // The sandbox side speaks HTTP/1.1 (the leaf contexts offer only it);
  // so does the upstream side.
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(upstream_->native_handle(), kAlpn, sizeof kAlpn);
  return Status{};
}

void VaultProxy::OnVaultChange(const std::string& id) {
  if (syncing_.count(id)) {
    dirty_.insert(id);
    return;
  }
  syncing_.insert(id);
  asio::co_spawn(io_, SyncLoop(id), asio::detached);
}

void VaultProxy::ArmAll() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(opts_.ca_dir, ec)) {
    const std::string id = e.path().stem().string();
    auto rec = mgr_->Get(id);
    if (!rec.ok() || rec->status == SandboxStatus::kStopped ||
        rec->status == SandboxStatus::kFailed)
      VaultCa::Remove(opts_.ca_dir, id);
  }
  ListFilter f;
  for (;;) {
    auto page = mgr_->List(f);
    for (const auto& rec : page.items)
      if (book_->Find(rec.id)) OnVaultChange(rec.id);
    if (page.next_cursor.empty()) break;
    f.cursor = page.next_cursor;
  }
}

asio::awaitable<void> VaultProxy::SyncLoop(std::string id) {
  do {
    dirty_.erase(id);
    auto st = co_await Sync(id);
    failed_.erase(id);
    if (!st.ok()) {
      spdlog::error("sandbox={} vault_proxy_failed err=\"{}\"", id, st.error().message);
      if (mgr_->Get(id).ok()) failed_[id] = st.error();
    }
  } while (dirty_.count(id));
  syncing_.erase(id);
}

asio::awaitable<Status> VaultProxy::Settled(std::string id) {
  asio::steady_timer t(io_);
  while (syncing_.count(id)) {
    t.expires_after(std::chrono::milliseconds(2));
    error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (auto it = failed_.find(id); it != failed_.end()) co_return it->second;
  co_return Status{};
}

asio::awaitable<Status> VaultProxy::Sync(const std::string& id) {
  auto rec = mgr_->Get(id);
  if (!rec.ok() || rec->status == SandboxStatus::kStopped ||
      rec->status == SandboxStatus::kFailed) {
    co_await Disarm(id, true);
    co_return Status{};
  }
  std::set<int> ports = BoundPorts(book_->Find(id));
  if (ports.empty() || rec->net_slot < 0 || !mgr_->network()) {
    co_await Disarm(id, false);
    co_return Status{};
  }
  co_return co_await Arm(id, mgr_->network()->NetnsPath(rec->net_slot), std::move(ports));
}

asio::awaitable<Status> VaultProxy::Arm(const std::string& id, const std::string& netns_path,
                                        std::set<int> ports) {
  auto it = armed_.find(id);
  if (it == armed_.end()) {
    Armed a;
    a.netns = std::make_shared<UniqueFd>(open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!*a.netns) co_return ErrnoError("open " + netns_path, errno);
    bool created = false;
    auto ca = VaultCa::LoadOrCreate(opts_.ca_dir, id, &created);
    if (!ca.ok()) co_return ca.error();
    a.ca = *ca;
    auto fd = TcpSocketInNetns(a.netns->get());
    if (!fd.ok()) co_return fd.error();
    a.acceptor = std::make_shared<tcp::acceptor>(io_);
    error_code ec;
    a.acceptor->assign(tcp::v4(), fd->release(), ec);
    if (!ec) a.acceptor->bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0), ec);
    if (!ec) a.acceptor->listen(kBacklog, ec);
    if (ec) co_return MakeError(Code::kInternal, "vault listener: " + ec.message());
    a.listen_port = a.acceptor->local_endpoint(ec).port();
    if (created) {
      if (auto st = co_await InstallCa(id, a.ca->cert_pem()); !st.ok()) {
        VaultCa::Remove(opts_.ca_dir, id);
        co_return st.error().Context("install the vault CA");
      }
    }
    asio::co_spawn(io_, AcceptLoop(id, a.acceptor), asio::detached);
    it = armed_.emplace(id, std::move(a)).first;
    netns_of_[id] = netns_path;
  }
  if (it->second.ports == ports) co_return Status{};
  const std::string script = RedirectScript(ports, it->second.listen_port);
  if (auto st = co_await ApplyRedirect(netns_path, script); !st.ok()) co_return st;
  it->second.ports = std::move(ports);
  spdlog::info("sandbox={} vault_proxy_armed ports={}", id, it->second.ports.size());
  co_return Status{};
}

asio::awaitable<void> VaultProxy::Disarm(const std::string& id, bool gone) {
  if (gone) VaultCa::Remove(opts_.ca_dir, id);
  auto it = armed_.find(id);
  if (it == armed_.end()) co_return;
  error_code ec;
  it->second.acceptor->close(ec);
  const std::string netns = netns_of_[id];
  armed_.erase(it);
  netns_of_.erase(id);
  // A gone sandbox's namespace goes with it; a live one keeps running
  // without the redirect.
  if (!gone) {
    if (auto st = co_await ApplyRedirect(netns, kRemoveScript); !st.ok())
      spdlog::error("sandbox={} vault_disarm_failed err=\"{}\"", id, st.error().message);
  }
  spdlog::info("sandbox={} vault_proxy_disarmed", id);
}

asio::awaitable<Status> VaultProxy::ApplyRedirect(const std::string& netns_path,
                                                  const std::string& script) {
  // (Named before the co_await: GCC 12 miscompiles the braced temporary.)
  const std::vector<std::string> argv = {opts_.nsenter, "--net=" + netns_path, opts_.nft, "-f",
                                         "-"};
  co_return co_await RunToolWithInput(argv, &script, kNftTimeout);
}

asio::awaitable<Status> VaultProxy::InstallCa(const std::string& id, const std::string& pem) {
  auto sb = mgr_->GetRunning(id);
  if (!sb.ok()) co_return sb.error();
  auto bundle = co_await ReadWholeFile(*sb, kBundle, "root", kBundleMax);
  std::string text = bundle.ok() ? *bundle : std::string();
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += pem;
  auto w = co_await WriteWholeFile(*sb, kBundle, "root", 0644, text);
  if (!w.ok()) co_return w.error();
  co_return Status{};
}

asio::awaitable<void> VaultProxy::AcceptLoop(std::string id,
                                             std::shared_ptr<tcp::acceptor> acceptor) {
  for (;;) {
    error_code ec;
    tcp::socket s = co_await acceptor->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (!acceptor->is_open()) co_return;
      continue;
    }
    auto it = armed_.find(id);
    if (it == armed_.end() || it->second.acceptor != acceptor) co_return;
    VaultRelayEnv env{id, book_, it->second.netns, it->second.ca, upstream_};
    asio::co_spawn(io_, ServeVaultConnection(std::move(s), std::move(env)), asio::detached);
  }
}

}  // namespace hutch::server
