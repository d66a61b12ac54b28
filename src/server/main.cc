// hutchd: the hutch server. Wires the layers together: state dir and API
// keys, the base template, the jail driver, the sandbox manager and the
// HTTP front, all on one I/O thread.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <spdlog/spdlog.h>
#include <sstream>

#include "http/http_server.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "common/subprocess.h"
#include "common/unique_fd.h"
#include "common/log_format.h"
#include "core/sandbox_manager.h"
#include "core/templates.h"
#include "driver/agent_connection.h"
#include "driver/jail/jail_driver.h"
#include "driver/vm/vm_driver.h"
#include "net/network_manager.h"
#include "server/hutch_api.h"
#include "store/state_store.h"

namespace fs = std::filesystem;
using namespace hutch;

namespace {

std::vector<std::string> SplitKeys(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string k;
  while (std::getline(ss, k, sep)) {
    while (!k.empty() && isspace(static_cast<unsigned char>(k.back()))) k.pop_back();
    size_t b = 0;
    while (b < k.size() && isspace(static_cast<unsigned char>(k[b]))) ++b;
    k = k.substr(b);
    if (!k.empty() && k[0] != '#') out.push_back(k);
  }
  return out;
}

// Operator-provided keys: HUTCH_API_KEY (comma-separated), else the lines
// of --keys-file. Empty when neither is set.
Result<std::vector<std::string>> OperatorKeys(const std::string& keys_file) {
  if (const char* env = getenv("HUTCH_API_KEY"); env && *env) {
    auto keys = SplitKeys(env, ',');
    if (!keys.empty()) return keys;
  }
  if (keys_file.empty()) return std::vector<std::string>{};
  std::ifstream in(keys_file);
  if (!in) return MakeError(Code::kInvalidRequest, "cannot read keys file " + keys_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto keys = SplitKeys(ss.str(), '\n');
  if (keys.empty()) return MakeError(Code::kInvalidRequest, "keys file " + keys_file + " holds no key");
  return keys;
}

// Makes a key, stores only its hash, and prints it: the one time anyone
// sees it.
Result<std::string> NewStoredKey(store::StateStore* db, const std::string& label) {
  std::string key = "hk_" + RandomHex(20);
  if (auto st = db->AddApiKeyHash(Sha256Hex(key), label); !st.ok()) return st.error();
  return key;
}

// Hashes of the keys hutchd accepts: the operator's (HUTCH_API_KEY or
// --keys-file) if any, else the keys stored in the state store; on the
// very first start a key is generated and printed once.
Result<std::vector<std::string>> LoadKeyHashes(const std::string& keys_file, store::StateStore* db,
                                               bool allow_generate) {
  auto keys = OperatorKeys(keys_file);
  if (!keys.ok()) return keys.error();
  std::vector<std::string> hashes;
  for (const auto& k : *keys) hashes.push_back(Sha256Hex(k));
  if (!hashes.empty()) return hashes;
  auto stored = db->LoadApiKeyHashes();
  if (!stored.ok()) return stored.error();
  if (!stored->empty() || !allow_generate) return stored;
  auto key = NewStoredKey(db, "generated at first start");
  if (!key.ok()) return key.error();
  std::cout << "hutchd: generated an API key. It is shown only this once (the state dir keeps only its hash):\n  "
            << *key << "\n(make another with: hutchd --state-dir DIR --new-key)" << std::endl;
  return std::vector<std::string>{Sha256Hex(*key)};
}

// Process checkpoint/restore would let snapshots keep memory. It is probed,
// never assumed: CRIU from Debian fails `criu check` on some kernels (an
// unexpected vDSO layout), and hutch does not use it yet even where it
// passes — snapshots say "memory": false either way.
std::string ProbeCriu() {
  const char* bin = "/usr/sbin/criu";
  if (access(bin, X_OK) != 0) return "not installed";
  asio::io_context io;
  Status result;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    std::vector<std::string> argv = {bin, "check"};
    result = co_await RunTool(argv, std::chrono::seconds(20));
  }, asio::detached);
  io.run();
  if (result.ok()) return "check passed (not used yet: snapshots hold files only)";
  return "check failed: " + result.error().message;
}

std::string InstanceTag(const std::string& state_dir) {
  // FNV-1a of the state dir: stable across restarts, distinct per state dir.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : state_dir) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("h") + std::string(buf, 8);
}

std::string ExeDir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

// Physical memory in MB (for the default commitment cap).
int64_t HostMemoryMb() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / (1024 * 1024) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hutchd: self-hosted code-execution sandboxes for AI agents"};
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = "/var/lib/hutch";
  std::string keys_file, templates_dir, agent_path, builder, log_level = "info", durability = "normal";
  uint32_t uid_base = 1000000;
  bool new_key = false;
  VolumeOptions vopts;
  ManagerOptions mopts;
  mopts.max_memory_committed_mb = 2 * HostMemoryMb();
  api::ApiConfig acfg;
  size_t output_cap_mb = 16;
  std::string net_pool = "10.201.0.0/16", dns_upstream;
  int net_warm = 8;
  std::string default_driver = "jail", vm_guest_dir = "/var/cache/hutch/vm-guest", vm_accel = "auto", vm_user,
              vm_init_path;
  bool no_network = false;
  bool no_vm_snapshots = false;
  app.add_option("--listen", listen, "ADDR:PORT to serve on (port 0: any free port)");
  app.add_option("--state-dir", state_dir, "Directory for state, sandboxes and keys");
  app.add_option("--keys-file", keys_file, "File with API keys, one per line (HUTCH_API_KEY overrides)");
  app.add_flag("--new-key", new_key, "Generate an API key, store its hash, print it, and exit (SIGHUP a running hutchd to load it)");
  app.add_option("--templates-dir", templates_dir, "Directory of templates (default <state-dir>/templates)");
  app.add_option("--agent", agent_path, "hutch-agent binary (default: beside hutchd)");
  app.add_option("--driver", default_driver, "Driver of sandboxes created without \"driver\": jail or vm")
      ->check(CLI::IsMember({"jail", "vm"}))
      ->capture_default_str();
  app.add_option("--vm-guest-dir", vm_guest_dir, "The vm driver's guest kernel (scripts/vm-guest DIR makes it)")
      ->capture_default_str();
  app.add_option("--vm-accel", vm_accel, "auto (KVM only where stock guest kernels run), tcg or kvm")
      ->check(CLI::IsMember({"auto", "tcg", "kvm"}))
      ->capture_default_str();
  app.add_flag("--no-vm-snapshots", no_vm_snapshots,
               "Cold-boot every vm sandbox (default: boot once per template and size, restore the rest)");
  app.add_option("--vm-user", vm_user, "User QEMU runs as (default: hutch-vm if it exists, else nobody)");
  app.add_option("--vm-init", vm_init_path, "hutch-vm-init binary (default: beside hutchd)");
  app.add_option("--template-builder", builder, "Script that builds the base template");
  app.add_option("--uid-base", uid_base, "First host uid of the range sandboxes map to");
  app.add_option("--max-sandboxes", mopts.max_sandboxes, "Sandboxes this host runs at once");
  app.add_option("--max-memory-committed-mb", mopts.max_memory_committed_mb,
                 "Sum of sandbox memory limits the host accepts (default 2x RAM; 0 = no cap)");
  app.add_option("--default-ttl", mopts.default_ttl_seconds, "Default ttl_seconds");
  app.add_option("--max-ttl", mopts.max_ttl_seconds, "Largest ttl_seconds accepted");
  app.add_option("--pids-max", mopts.pids_max, "Processes per sandbox");
  app.add_option("--default-volume-mb", vopts.default_size_mb, "Size of a volume created without size_mb")
      ->capture_default_str();
  app.add_option("--max-volume-mb", vopts.max_size_mb, "Largest size_mb of a volume")->capture_default_str();
  app.add_option("--exec-output-limit-mb", output_cap_mb, "Per-stream output kept by blocking exec");
  double agent_timeout_s = 60;
  app.add_option("--agent-timeout", agent_timeout_s,
                 "Seconds a sandbox's agent may take to answer a request (file, exec or process start), or to "
                 "accept queued upload data, before the request fails with agent_timeout (504)")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  size_t max_connections = 0;
  app.add_option("--max-connections", max_connections,
                 "Client connections served at once, more get 503 (default: the open-file limit less 1024 "
                 "kept for sandboxes, or half of a limit below 2048)");
  app.add_option("--durability", durability, "normal: state survives a hutchd crash; full: also power loss (fsync per write)")
      ->check(CLI::IsMember({"normal", "full"}));
  app.add_option("--net-pool", net_pool, "IPv4 network sandbox subnets (/30 each) are taken from (/16 to /28)")
      ->capture_default_str();
  app.add_option("--dns-upstream", dns_upstream,
                 "Resolver (IPv4[:port]) for names sandbox policies allow (default: the host's /etc/resolv.conf)");
  app.add_option("--net-warm", net_warm, "Network namespaces kept ready for creates (during a burst up to 4x this, following demand)")->capture_default_str();
  app.add_flag("--no-network", no_network, "No sandbox networking: only network mode none (loopback) is served");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  // Observability: request rate limit per API key, log line format.
  std::string log_format = "text";
  std::string osb_images;
  app.add_option("--opensandbox-images", osb_images,
                 "JSON file {\"<image>\": \"<template>\"} mapping OpenSandbox image URIs to templates (over the defaults)");
  app.add_option("--rate-limit", acfg.rate_limit_rps, "Requests a second per API key on /v1 (0: no limit)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--rate-burst", acfg.rate_limit_burst, "Requests an API key may send at once (bucket size)")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text (ts level event k=v ...) or json (one object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  AgentConnection::set_answer_timeout(std::chrono::milliseconds(static_cast<int64_t>(agent_timeout_s * 1000)));

  spdlog::set_level(spdlog::level::from_str(log_level));
  LogFormat lf = LogFormat::kText;
  ParseLogFormat(log_format, &lf);
  InstallLogFormat(lf);
  signal(SIGPIPE, SIG_IGN);
  if (geteuid() != 0) {
    std::cerr << "hutchd: the jail driver needs root (namespaces, cgroups, mounts)\n";
    return 2;
  }
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) {
    std::cerr << "hutchd: cannot create state dir " << state_dir << ": " << ec.message() << "\n";
    return 2;
  }
  chmod(state_dir.c_str(), 0700);
  state_dir = fs::canonical(state_dir).string();

  auto db = store::StateStore::Open(state_dir + "/state.db",
                                    durability == "full" ? store::Durability::kFull : store::Durability::kNormal);
  if (!db.ok()) {
    std::cerr << "hutchd: " << db.error().message << "\n";
    return 2;
  }
  if (new_key) {
    auto key = NewStoredKey(db->get(), "hutchd --new-key");
    if (!key.ok()) {
      std::cerr << "hutchd: " << key.error().message << "\n";
      return 2;
    }
    std::cout << *key << std::endl;
    return 0;
  }

  // One hutchd per state dir: a second one would reconcile away the
  // first one's sandboxes. The lock dies with the process, even on kill -9.
  // A sandbox that was mid-setup when the previous hutchd died may hold a
  // copy of its lock for a few milliseconds more: wait a little.
  UniqueFd lock(open((state_dir + "/hutchd.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  bool locked = false;
  for (int i = 0; lock && i < 100 && !(locked = flock(lock.get(), LOCK_EX | LOCK_NB) == 0); ++i) usleep(30 * 1000);
  if (!locked) {
    std::cerr << "hutchd: another hutchd is using state dir " << state_dir << "\n";
    return 2;
  }
  // An address file left by a crashed run would point clients at nothing.
  fs::remove(state_dir + "/hutchd.addr", ec);

  if (templates_dir.empty()) templates_dir = state_dir + "/templates";
  if (agent_path.empty()) agent_path = ExeDir() + "/hutch-agent";
  if (builder.empty()) {
    builder = std::string(HUTCH_SOURCE_DIR) + "/scripts/build-base-template";
    if (!fs::exists(builder)) builder = ExeDir() + "/../share/hutch/build-base-template";
  }
  acfg.exec_output_cap = output_cap_mb << 20;
  if (!osb_images.empty()) {
    auto t = api::opensandbox::ImageTable::LoadOver(osb_images);
    if (!t.ok()) {
      std::cerr << "hutchd: --opensandbox-images: " << t.error().message << "\n";
      return 2;
    }
    acfg.opensandbox_images = std::move(*t);
  }

  auto keys = LoadKeyHashes(keys_file, db->get(), true);
  if (!keys.ok()) {
    std::cerr << "hutchd: " << keys.error().message << "\n";
    return 2;
  }
  acfg.api_key_hashes = *keys;

  TemplateRegistryOptions topts;
  topts.dir = templates_dir;
  topts.builds_dir = state_dir + "/builds";
  topts.builder_script = builder;
  topts.aliases_file = state_dir + "/aliases.toml";
  topts.uid_base = uid_base;
  TemplateRegistry templates(topts, db->get());
  if (auto st = templates.EnsureBase(); !st.ok()) {
    std::cerr << "hutchd: base template: " << st.error().message << "\n";
    return 2;
  }
  if (auto st = templates.Load(); !st.ok()) {
    std::cerr << "hutchd: templates: " << st.error().message << "\n";
    return 2;
  }

  jail::JailDriverOptions dopts;
  dopts.state_dir = state_dir;
  dopts.agent_path = agent_path;
  dopts.instance_tag = InstanceTag(state_dir);
  dopts.uid_base = uid_base;
  auto driver = jail::JailDriver::Make(dopts);
  if (!driver.ok()) {
    std::cerr << "hutchd: jail driver: " << driver.error().message << "\n";
    return 2;
  }

  // The vm driver is optional: a host without QEMU or a guest kernel still
  // serves jail sandboxes, and says why "driver":"vm" fails.
  std::unique_ptr<vm::VmDriver> vm_driver;
  std::string vm_why;
  {
    vm::VmDriverOptions vo;
    vo.state_dir = state_dir;
    vo.guest_dir = vm_guest_dir;
    vo.agent_path = agent_path;
    vo.init_path = vm_init_path.empty() ? ExeDir() + "/hutch-vm-init" : vm_init_path;
    vo.instance_tag = dopts.instance_tag;
    vo.accel = vm_accel;
    vo.user = vm_user;
    vo.uid_base = uid_base;
    vo.boot_snapshots = !no_vm_snapshots;
    auto v = vm::VmDriver::Make(vo);
    if (v.ok()) {
      vm_driver = std::move(v).value();
    } else {
      vm_why = v.error().message;
      spdlog::warn("vm_driver unavailable err=\"{}\"", vm_why);
    }
  }
  if (default_driver == "vm" && !vm_driver) {
    std::cerr << "hutchd: --driver vm: " << vm_why << "\n";
    return 2;
  }

  std::string criu = ProbeCriu();
  spdlog::info("criu={}", criu);
  nlohmann::json drivers = nlohmann::json::array({"jail"});
  if (vm_driver) drivers.push_back("vm");
  acfg.capabilities = {{"driver", default_driver},
                       {"drivers", drivers},
                       {"cgroup_version", (*driver)->cgroup_version()},
                       {"memory_snapshots", false},
                       {"criu", criu},
                       {"volumes", true}};
  mopts.snapshots_dir = state_dir + "/snapshots";
  fs::create_directories(mopts.snapshots_dir, ec);
  asio::io_context io(1);

  // Networking is optional: a host without nftables or iproute2 still
  // serves sandboxes with mode none, and says why the others fail.
  std::unique_ptr<net::NetworkManager> network;
  std::string net_why = "disabled with --no-network";
  if (!no_network) {
    net::NetworkOptions nopts;
    nopts.tag = dopts.instance_tag;
    nopts.warm = std::max(0, net_warm);
    auto pool = net::ParseCidr(net_pool);
    if (!pool.ok()) {
      std::cerr << "hutchd: --net-pool: " << pool.error().message << "\n";
      return 2;
    }
    nopts.pool = *pool;
    if (!dns_upstream.empty()) {
      std::string host = dns_upstream;
      uint16_t port = 53;
      if (auto c = host.find(':'); c != std::string::npos) {
        port = static_cast<uint16_t>(std::atoi(host.c_str() + c + 1));
        host.resize(c);
      }
      uint32_t a;
      if (!net::ParseIpv4(host, &a) || port == 0) {
        std::cerr << "hutchd: --dns-upstream must be IPv4[:port]\n";
        return 2;
      }
      nopts.dns_upstream = asio::ip::udp::endpoint(asio::ip::address_v4(a), port);
    }
    bool done = false;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      auto m = co_await net::NetworkManager::Start(io, nopts);
      if (m.ok()) network = std::move(m).value();
      else net_why = m.error().message;
      done = true;
    }, asio::detached);
    while (!done && io.run_one() > 0) {
    }
    io.restart();
    if (!network) spdlog::warn("net unavailable err=\"{}\" (only network mode none is served)", net_why);
  }
  acfg.capabilities["network"] = network != nullptr;
  if (!network) acfg.capabilities["network_unavailable"] = net_why;

  SandboxManager mgr(mopts, driver->get(), &templates, db->get());
  if (vm_driver) {
    mgr.AddDriver(vm_driver.get(), default_driver == "vm");
    acfg.capabilities["vm_accel"] = vm_driver->accel().why;
    acfg.capabilities["vm_kernel"] = vm_driver->kernel_release();
  } else {
    mgr.SetDriverUnavailable("vm", vm_why);
    acfg.capabilities["vm_unavailable"] = vm_why;
  }
  mgr.SetNetwork(network.get(), net_why);
  vopts.dir = state_dir + "/volumes";
  vopts.uid_base = uid_base;
  VolumeManager volumes(vopts, db->get());
  mgr.SetVolumes(&volumes);
  TemplateBuilder template_builder(TemplateBuildOptions{}, driver->get(), &templates);
  template_builder.SetNetwork(network.get(), net_why);
  mgr.SetTemplateBuilder(&template_builder);
  api::HutchApi api(acfg, &mgr);
  api::HttpServer server(io, &api.router());
  {
    // Every open connection holds an fd: take the whole open-file limit we
    // may, and keep part of it for sandboxes, agents and files.
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    const size_t nofile = rl.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(rl.rlim_cur);
    if (max_connections == 0) max_connections = nofile >= 2048 ? nofile - 1024 : nofile / 2;
    server.set_max_connections(max_connections);
    spdlog::info("connections max={} nofile={}", max_connections, nofile);
  }
  auto ep = server.Listen(listen);
  if (!ep.ok()) {
    std::cerr << "hutchd: " << ep.error().message << "\n";
    return 2;
  }
  std::string addr = ep->address().to_string() + ":" + std::to_string(ep->port());
  int exit_code = 0;

  // Recovery runs before the first request is accepted: a client never
  // sees a sandbox the server has not yet decided to adopt or drop.
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto vrep = volumes.Recover();
    if (!vrep.ok()) {
      std::cerr << "hutchd: " << vrep.error().message << "\n";
      exit_code = 2;
      io.stop();
      co_return;
    }
    spdlog::info("volumes_recovered mounted={} kept={} removed={} broken={}", vrep->mounted, vrep->kept,
                 vrep->removed, vrep->broken);
    auto rep = co_await mgr.Recover();
    if (!rep.ok()) {
      std::cerr << "hutchd: " << rep.error().message << "\n";
      exit_code = 2;
      io.stop();
      co_return;
    }
    spdlog::info("recovered adopted={} lost={} expired={} forgotten={} removed={}", rep->adopted, rep->lost,
                 rep->expired, rep->forgotten, rep->removed);
    server.Start();
    mgr.StartReaper(io.get_executor());
    // Tests and scripts read the bound address (port 0 picks one).
    std::error_code e;
    std::string tmp = state_dir + "/hutchd.addr.tmp";
    std::ofstream(tmp) << addr << "\n";
    fs::rename(tmp, state_dir + "/hutchd.addr", e);
    spdlog::info("hutchd listening on {} state_dir={} driver={} cgroup=v{} tag={}", addr, state_dir, default_driver,
                 (*driver)->cgroup_version(), dopts.instance_tag);
    std::cout << "hutchd listening on http://" << addr << std::endl;
  }, asio::detached);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code e, int sig) {
    if (e) return;
    spdlog::info("signal={} shutting down", sig);
    server.Stop();
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      co_await mgr.Shutdown();
      if (network) co_await network->Shutdown();
      volumes.Shutdown();
      io.stop();
    }, asio::detached);
  });
  // SIGHUP reloads the API keys (keys file, or keys added with --new-key).
  asio::signal_set hup(io, SIGHUP);
  std::function<void(boost::system::error_code, int)> on_hup = [&](boost::system::error_code e, int) {
    if (e) return;
    auto reloaded = LoadKeyHashes(keys_file, db->get(), false);
    if (reloaded.ok() && !reloaded->empty()) {
      api.SetKeyHashes(*reloaded);
      spdlog::info("keys_reloaded count={}", reloaded->size());
    } else {
      spdlog::error("keys_reload_failed err=\"{}\"", reloaded.ok() ? "no key" : reloaded.error().message);
    }
    hup.async_wait(on_hup);
  };
  hup.async_wait(on_hup);
  io.run();
  fs::remove(state_dir + "/hutchd.addr", ec);
  spdlog::info("hutchd stopped");
  return exit_code;
}
