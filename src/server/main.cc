// hutchd: the hutch server. Wires the layers together: state dir and API
// keys, the base template, the jail driver, the sandbox manager and the
// HTTP front, all on one I/O thread.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <spdlog/spdlog.h>
#include <sstream>

#include "api/http_server.h"
#include "common/clock.h"
#include "common/log_format.h"
#include "core/sandbox_manager.h"
#include "core/templates.h"
#include "driver/jail/jail_driver.h"

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

// Keys from HUTCH_API_KEY, else --keys-file, else <state>/api_key (made on
// first start and printed once).
Result<std::vector<std::string>> LoadKeys(const std::string& keys_file, const std::string& state_dir) {
  if (const char* env = getenv("HUTCH_API_KEY"); env && *env) {
    auto keys = SplitKeys(env, ',');
    if (!keys.empty()) return keys;
  }
  std::string path = keys_file.empty() ? state_dir + "/api_key" : keys_file;
  std::ifstream in(path);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    auto keys = SplitKeys(ss.str(), '\n');
    if (keys.empty()) return MakeError(Code::kInvalidRequest, "keys file " + path + " holds no key");
    return keys;
  }
  if (!keys_file.empty()) return MakeError(Code::kInvalidRequest, "cannot read keys file " + keys_file);
  std::string key = "hk_" + RandomHex(20);
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create " + tmp);
  std::string line = key + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) return ErrnoError("store " + path);
  std::cout << "hutchd: generated an API key (stored in " << path << "):\n  " << key << std::endl;
  return std::vector<std::string>{key};
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hutchd: self-hosted code-execution sandboxes for AI agents"};
  std::string listen = "127.0.0.1:8080";
  std::string state_dir = "/var/lib/hutch";
  std::string keys_file, templates_dir, agent_path, builder, log_level = "info";
  uint32_t uid_base = 1000000;
  ManagerOptions mopts;
  api::ApiConfig acfg;
  size_t output_cap_mb = 16;
  app.add_option("--listen", listen, "ADDR:PORT to serve on (port 0: any free port)");
  app.add_option("--state-dir", state_dir, "Directory for state, sandboxes and keys");
  app.add_option("--keys-file", keys_file, "File with API keys, one per line (HUTCH_API_KEY overrides)");
  app.add_option("--templates-dir", templates_dir, "Directory of templates (default <state-dir>/templates)");
  app.add_option("--agent", agent_path, "hutch-agent binary (default: beside hutchd)");
  app.add_option("--template-builder", builder, "Script that builds the base template");
  app.add_option("--uid-base", uid_base, "First host uid of the range sandboxes map to");
  app.add_option("--max-sandboxes", mopts.max_sandboxes, "Sandboxes this host runs at once");
  app.add_option("--default-ttl", mopts.default_ttl_seconds, "Default ttl_seconds");
  app.add_option("--max-ttl", mopts.max_ttl_seconds, "Largest ttl_seconds accepted");
  app.add_option("--pids-max", mopts.pids_max, "Processes per sandbox");
  app.add_option("--exec-output-limit-mb", output_cap_mb, "Per-stream output kept by blocking exec");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  // Observability: request rate limit per API key, log line format.
  std::string log_format = "text";
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
  if (templates_dir.empty()) templates_dir = state_dir + "/templates";
  if (agent_path.empty()) agent_path = ExeDir() + "/hutch-agent";
  if (builder.empty()) {
    builder = std::string(HUTCH_SOURCE_DIR) + "/scripts/build-base-template";
    if (!fs::exists(builder)) builder = ExeDir() + "/../share/hutch/build-base-template";
  }
  acfg.exec_output_cap = output_cap_mb << 20;

  auto keys = LoadKeys(keys_file, state_dir);
  if (!keys.ok()) {
    std::cerr << "hutchd: " << keys.error().message << "\n";
    return 2;
  }
  acfg.api_keys = *keys;

  TemplateRegistry templates(templates_dir, builder, uid_base);
  if (auto st = templates.EnsureBase(); !st.ok()) {
    std::cerr << "hutchd: base template: " << st.error().message << "\n";
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
  int cleaned = (*driver)->ReconcileAtStart();
  if (cleaned > 0) spdlog::info("reconcile removed={} (left by an earlier run)", cleaned);

  asio::io_context io(1);
  SandboxManager mgr(mopts, driver->get(), &templates);
  api::Api api(acfg, &mgr);
  api::HttpServer server(io, &api);
  auto ep = server.Listen(listen);
  if (!ep.ok()) {
    std::cerr << "hutchd: " << ep.error().message << "\n";
    return 2;
  }
  server.Start();
  mgr.StartReaper(io.get_executor());

  std::string addr = ep->address().to_string() + ":" + std::to_string(ep->port());
  {
    // Tests and scripts read the bound address (port 0 picks one).
    std::string tmp = state_dir + "/hutchd.addr.tmp";
    std::ofstream(tmp) << addr << "\n";
    fs::rename(tmp, state_dir + "/hutchd.addr", ec);
  }
  spdlog::info("hutchd listening on {} state_dir={} driver=jail cgroup=v{}", addr, state_dir,
               (*driver)->cgroup_version());
  std::cout << "hutchd listening on http://" << addr << std::endl;

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code e, int sig) {
    if (e) return;
    spdlog::info("signal={} shutting down", sig);
    server.Stop();
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      co_await mgr.Shutdown();
      io.stop();
    }, asio::detached);
  });
  io.run();
  fs::remove(state_dir + "/hutchd.addr", ec);
  spdlog::info("hutchd stopped");
  return 0;
}
