// hutch_bench: the user-facing figures of bench/README.md, each beside a
// baseline measured in the same run (design/benchmarks.md). Starts its own
// hutchd on port 0 with a temp state dir, prints one table, optionally
// writes JSON. A measurement, not a test: it exits 0 whether targets hold
// or not, and non-zero only when it could not measure (hutchd would not
// start, a request failed).
//
//   hutch_bench [--n N] [--json FILE]
//   env: HUTCHD_BIN (default build/hutchd), HUTCH_TEMPLATES_DIR (default
//        build/test-templates), HUTCH_AGENT_BIN (optional, passed as --agent),
//        HUTCH_VM_GUEST_DIR (optional: the vm driver's guest kernel; adds
//        the vm rows when the server can boot VMs)
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_support.h"
#include "client/http_client.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace hutch::bench;

// ---------------------------------------------------------------- hutch API helpers

std::string CreateSandbox(hutch::client::HttpClient& c) {
  auto r = c.Json("POST", "/v1/sandboxes", json::object());
  if (r.status != 201)
    throw std::runtime_error("create: HTTP " + std::to_string(r.status) + " " + r.body);
  return r.json().at("id").get<std::string>();
}

void DeleteSandbox(hutch::client::HttpClient& c, const std::string& id) {
  auto r = c.Request("DELETE", "/v1/sandboxes/" + id);
  if (r.status != 204)
    throw std::runtime_error("delete: HTTP " + std::to_string(r.status) + " " + r.body);
}

// Blocking exec; throws unless HTTP 200 and exit_code 0 (and, when given,
// stdout equals `want`).
void Exec(hutch::client::HttpClient& c, const std::string& id, const json& body,
          const std::optional<std::string>& want = std::nullopt) {
  auto r = c.Json("POST", "/v1/sandboxes/" + id + "/exec", body);
  if (r.status != 200)
    throw std::runtime_error("exec: HTTP " + std::to_string(r.status) + " " + r.body);
  auto j = r.json();
  if (!j.is_object() || j.value("exit_code", -1) != 0) throw std::runtime_error("exec: " + r.body);
  if (want && j.value("stdout", std::string()) != *want)
    throw std::runtime_error("exec: unexpected " + r.body);
}

// Decoded byte count of one stdout/stderr SSE event's data, i.e.
// {"text":"<JSON string>"} or {"b64":"<base64>"}, without building the
// string: a 64 KiB chunk of NULs is 384 KiB of `\u0000` escapes, and a full
// JSON parse of 200 MB of those costs the client ~13 s of CPU on this
// machine, which would then compete with hutchd for the same 2 cores.
// Falls back to a full parse for any other shape.
uint64_t StdoutEventBytes(const std::string& data) {
  static const std::string kText = "{\"text\":\"", kB64 = "{\"b64\":\"";
  auto slow = [&]() -> uint64_t {
    auto d = json::parse(data);
    if (d.contains("text")) return d["text"].get_ref<const std::string&>().size();
    if (d.contains("b64")) return hutch::client::Base64Decode(d["b64"].get<std::string>()).size();
    return 0;
  };
  if (data.rfind(kB64, 0) == 0) {
    size_t end = data.find('"', kB64.size());
    if (end == std::string::npos) return slow();
    size_t len = end - kB64.size();
    size_t pad = 0;
    for (size_t i = end; i > kB64.size() && data[i - 1] == '=' && pad < 2; --i) ++pad;
    return len / 4 * 3 - pad;
  }
  if (data.rfind(kText, 0) != 0) return slow();
  auto hex = [&](size_t i, uint32_t* cp) {
    if (i + 4 > data.size()) return false;
    *cp = 0;
    for (size_t k = i; k < i + 4; ++k) {
      char ch = data[k];
      int v = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (v < 0) return false;
      *cp = *cp << 4 | static_cast<uint32_t>(v);
    }
    return true;
  };
  uint64_t n = 0;
  size_t i = kText.size();
  while (i < data.size()) {
    char ch = data[i];
    if (ch == '"') return data.compare(i, std::string::npos, "\"}") == 0 ? n : slow();
    if (ch != '\\') {
      ++n;
      ++i;
      continue;
    }
    if (i + 1 >= data.size()) return slow();
    if (data[i + 1] != 'u') {
      ++n;
      i += 2;
      continue;
    }
    uint32_t cp;
    if (!hex(i + 2, &cp)) return slow();
    i += 6;
    if (cp >= 0xd800 && cp < 0xdc00) {  // high surrogate: the pair is one 4-byte character
      uint32_t lo;
      if (i + 1 < data.size() && data[i] == '\\' && data[i + 1] == 'u' && hex(i + 2, &lo)) i += 6;
      n += 4;
    } else {
      n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    }
  }
  return slow();
}

// ---------------------------------------------------------------- results

struct Row {
  std::string key, label;
  std::optional<Stats> stats;  // nullopt: n/a
  std::string note;
};

struct Throughput {
  std::string key, label;
  double mb_per_s = 0;  // 1 MB = 10^6 bytes
  uint64_t bytes = 0;
  double seconds = 0;
  std::optional<uint64_t> peak_rss = std::nullopt;    // hutchd VmHWM during the transfer
  std::optional<uint64_t> rss_before = std::nullopt;  // hutchd VmRSS before it
  std::string note;
};

std::string FmtMs(double ms) {
  char b[32];
  if (ms < 10) snprintf(b, sizeof b, "%.2f", ms);
  else if (ms < 100) snprintf(b, sizeof b, "%.1f", ms);
  else snprintf(b, sizeof b, "%.0f", ms);
  return b;
}

std::string FmtMiB(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return b;
}

json StatsJson(const std::optional<Stats>& s) {
  if (!s) return nullptr;
  return {{"runs", s->runs},
          {"p50_ms", s->p50},
          {"p99_ms", s->p99},
          {"min_ms", s->min},
          {"max_ms", s->max}};
}

// ---------------------------------------------------------------- baselines

// A baseline runs `args`; empty stats (n/a) when the program is missing or
// fails once, with the reason in `note`.
struct Baseline {
  std::string key, label;
  std::vector<std::string> args;
  std::vector<double> samples;
  bool usable = true;
  std::string note;

  void Probe() {
    if (access(args[0].c_str(), X_OK) != 0) {
      usable = false;
      note = args[0] + " not found";
      return;
    }
    if (!Ok(RunQuiet(args))) {
      usable = false;
      note = "fails on this host";
    }
  }
  void RunOnce() {
    if (!usable) return;
    auto t0 = Clock::now();
    int st = RunQuiet(args);
    double ms = MsSince(t0);
    if (!Ok(st)) {
      usable = false;
      note = "failed during the run";
      samples.clear();
      return;
    }
    samples.push_back(ms);
  }
  Row ToRow() const {
    Row r{key, label, std::nullopt, note};
    if (usable) r.stats = Summarize(samples);
    return r;
  }
};

// ---------------------------------------------------------------- main

void Usage() {
  std::cout << "usage: hutch_bench [--n N] [--json FILE]\n"
               "  --n N        runs per latency figure (default 50; exec round trip uses 4*N)\n"
               "  --json FILE  also write the results as JSON\n"
               "env: HUTCHD_BIN (default build/hutchd), HUTCH_TEMPLATES_DIR (default "
               "build/test-templates),\n"
               "     HUTCH_AGENT_BIN (optional)\n";
}

int Run(Hutchd& server, int n, const std::string& json_path);

int Main(int argc, char** argv) {
  int n = 50;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--n" || a == "-n") && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (a.rfind("--n=", 0) == 0) {
      n = std::atoi(a.c_str() + 4);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a.rfind("--json=", 0) == 0) {
      json_path = a.substr(7);
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      std::cerr << "hutch_bench: unknown argument " << a << "\n";
      Usage();
      return 2;
    }
  }
  if (n < 2) {
    std::cerr << "hutch_bench: --n must be at least 2\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  std::string bin = Env("HUTCHD_BIN", "build/hutchd");
  std::string templates = Env("HUTCH_TEMPLATES_DIR", "build/test-templates");
  if (access(bin.c_str(), X_OK) != 0) {
    std::cerr << "hutch_bench: no hutchd at " << bin << " (set HUTCHD_BIN)\n";
    return 1;
  }

  Hutchd server(bin, templates);
  std::cerr << "hutch_bench: starting " << bin << " (templates " << templates << ")\n";
  server.Start();

  try {
    return Run(server, n, json_path);
  } catch (const std::exception& e) {
    std::string log = server.Log();
    if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
    throw std::runtime_error(std::string(e.what()) + "\nhutchd log (tail):\n" + log);
  }
}

int Run(Hutchd& server, int n, const std::string& json_path) {
  std::vector<Baseline> baselines = {
      {"fork_exec_true", "baseline: fork+exec /bin/true", {"/bin/true"}, {}, true, ""},
      {"bwrap_true",
       "baseline: bwrap --unshare-all --ro-bind / / /bin/true",
       {"/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "/bin/true"},
       {},
       true,
       ""},
      {"unshare_true",
       "baseline: unshare -U -r -p -f -m -n -i -u -C true",
       {"/usr/bin/unshare", "-U", "-r", "-p", "-f", "-m", "-n", "-i", "-u", "-C", "true"},
       {},
       true,
       ""},
  };
  for (auto& b : baselines) b.Probe();

  auto c = server.Client();
  const json echo_hi = {{"cmd", "echo hi"}, {"timeout_seconds", 30}};

  // Warm-up (not measured): page cache, template files, first connection.
  for (int i = 0; i < 3; ++i) {
    std::string id = CreateSandbox(c);
    Exec(c, id, echo_hi, "hi\n");
    DeleteSandbox(c, id);
    for (auto& b : baselines) {
      if (b.usable) RunQuiet(b.args);
    }
  }

  // 1 + 3: create -> first exec, interleaved with the baselines so that each
  // round sees the same machine noise. Sandboxes are created sequentially
  // on one keep-alive connection and deleted (untimed) right after.
  std::cerr << "hutch_bench: create -> first exec and baselines, " << n << " rounds\n";
  std::vector<double> create_exec, create_only, first_exec;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    std::string id = CreateSandbox(c);
    double t_create = MsSince(t0);
    auto t1 = Clock::now();
    Exec(c, id, echo_hi, "hi\n");
    double t_exec = MsSince(t1);
    create_exec.push_back(MsSince(t0));
    create_only.push_back(t_create);
    first_exec.push_back(t_exec);
    DeleteSandbox(c, id);
    for (auto& b : baselines) b.RunOnce();
  }

  // 2: exec round trip on one running sandbox, keep-alive connection.
  std::cerr << "hutch_bench: exec round trip, " << 4 * n << " runs each\n";
  std::string sb = CreateSandbox(c);
  const json exec_true = {{"cmd", "true"}, {"timeout_seconds", 30}};
  const json exec_argv = {{"argv", {"/bin/true"}}, {"timeout_seconds", 30}};
  for (int i = 0; i < 5; ++i) Exec(c, sb, exec_true);
  std::vector<double> rt_sh, rt_argv;
  for (int i = 0; i < 4 * n; ++i) {
    auto t0 = Clock::now();
    Exec(c, sb, exec_true);
    rt_sh.push_back(MsSince(t0));
    auto t1 = Clock::now();
    Exec(c, sb, exec_argv);
    rt_argv.push_back(MsSince(t1));
  }

  // Exposed ports: a GET through /ports/{port}/ to python's http.server in
  // the sandbox (a 13-byte file, keep-alive to hutchd, one new upstream
  // connection per request), next to the exec round trip on the same
  // sandbox. Same number of runs, interleaved.
  std::cerr << "hutch_bench: port proxy round trip, " << 4 * n << " runs\n";
  Exec(c, sb,
       {{"cmd", "mkdir -p /tmp/www && printf 'hello, proxy\\n' > /tmp/www/f.txt"},
        {"timeout_seconds", 30}});
  {
    auto r = c.Json("POST", "/v1/sandboxes/" + sb + "/processes",
                    {{"cmd", "cd /tmp/www && exec python3 -m http.server 8000 --bind 127.0.0.1"}});
    if (r.status != 201)
      throw std::runtime_error("start http.server: HTTP " + std::to_string(r.status) + " " +
                               r.body);
  }
  const std::string port_target = "/v1/sandboxes/" + sb + "/ports/8000/f.txt";
  for (int i = 0; i < 300; ++i) {
    if (c.Request("GET", port_target).status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto proxy_get = [&] {
    auto r = c.Request("GET", port_target);
    if (r.status != 200 || r.body != "hello, proxy\n")
      throw std::runtime_error("port proxy GET: HTTP " + std::to_string(r.status) + " " + r.body);
  };
  for (int i = 0; i < 5; ++i) proxy_get();
  std::vector<double> rt_proxy, rt_exec_cat;
  const json exec_cat = {{"argv", {"/bin/cat", "/tmp/www/f.txt"}}, {"timeout_seconds", 30}};
  for (int i = 0; i < 4 * n; ++i) {
    auto t0 = Clock::now();
    proxy_get();
    rt_proxy.push_back(MsSince(t0));
    auto t1 = Clock::now();
    Exec(c, sb, exec_cat, "hello, proxy\n");
    rt_exec_cat.push_back(MsSince(t1));
  }

  // 6: snapshots and fork (issue: fork of 1 <= 50 ms p50). The parent has
  // 10 MB of its own files, so the copy-on-write layer is not empty.
  std::cerr << "hutch_bench: snapshot, restore, fork of 1 and of 5\n";
  Exec(c, sb,
       {{"cmd", "head -c 10000000 /dev/urandom > /home/user/data.bin"}, {"timeout_seconds", 60}});
  std::vector<double> snap_ms, restore_ms, fork1_ms, fork5_ms;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    auto r = c.Request("POST", "/v1/sandboxes/" + sb + "/snapshots");
    snap_ms.push_back(MsSince(t0));
    std::string snap = r.json().value("id", "");
    auto t1 = Clock::now();
    auto made = c.Json("POST", "/v1/sandboxes", {{"snapshot", snap}});
    std::string id = made.json().value("id", "");
    Exec(c, id, echo_hi, "hi\n");
    restore_ms.push_back(MsSince(t1));
    DeleteSandbox(c, id);
    c.Request("DELETE", "/v1/snapshots/" + snap);
  }
  auto fork_round = [&](int count, std::vector<double>* out) {
    auto t0 = Clock::now();
    auto r = c.Json("POST", "/v1/sandboxes/" + sb + "/fork", {{"count", count}});
    auto j = r.json();
    std::vector<std::string> kids;
    if (j.is_object() && j["sandboxes"].is_array())
      for (auto& k : j["sandboxes"]) kids.push_back(k.value("id", ""));
    for (const auto& k : kids) Exec(c, k, echo_hi, "hi\n");
    out->push_back(MsSince(t0));
    for (const auto& k : kids) DeleteSandbox(c, k);
  };
  for (int i = 0; i < n; ++i) fork_round(1, &fork1_ms);
  for (int i = 0; i < std::max(5, n / 5); ++i) fork_round(5, &fork5_ms);

  // 7: create from a built template (one extra read-only layer with 20 MB
  // of files) against base, interleaved; and an unchanged rebuild (cache hit).
  std::cerr << "hutch_bench: template build, create from a template vs base\n";
  const std::string spec =
      "name = \"bench-tpl\"\nfrom = \"base\"\n"
      "run = [\"mkdir -p /opt/bench && head -c 20000000 /dev/urandom > /opt/bench/data.bin && echo "
      "ok > /opt/bench/ok\"]\n";
  auto build = c.Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
  if (build.status != 201)
    throw std::runtime_error("template build: HTTP " + std::to_string(build.status) + " " +
                             build.body);
  std::vector<double> tpl_create_ms, base_create_ms, cache_hit_ms;
  const json from_tpl = {{"template", "bench-tpl"}};
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    std::string id = CreateSandbox(c);
    Exec(c, id, echo_hi, "hi\n");
    base_create_ms.push_back(MsSince(t0));
    DeleteSandbox(c, id);
    auto t1 = Clock::now();
    auto made = c.Json("POST", "/v1/sandboxes", from_tpl);
    if (made.status != 201)
      throw std::runtime_error("create from template: HTTP " + std::to_string(made.status));
    std::string tid = made.json().value("id", "");
    Exec(c, tid, echo_hi, "hi\n");
    tpl_create_ms.push_back(MsSince(t1));
    DeleteSandbox(c, tid);
  }
  for (int i = 0; i < std::max(5, n / 5); ++i) {
    auto t0 = Clock::now();
    auto again = c.Request("POST", "/v1/templates", spec, {{"Content-Type", "application/toml"}});
    cache_hit_ms.push_back(MsSince(t0));
    if (again.status != 201)
      throw std::runtime_error("template rebuild: HTTP " + std::to_string(again.status));
  }

  // 8: networking (issue: 50 creates with mode all within 1.5x of mode
  // none). 50 sandboxes are created one after another and kept, so the
  // last creates run next to 49 live namespaces; then all are deleted.
  // Rounds alternate so both modes see the same machine noise.
  std::vector<double> net_none_ms, net_all_ms;
  const bool networking = c.Request("GET", "/healthz")
                              .json()
                              .value("capabilities", json::object())
                              .value("network", false);
  if (networking) {
    std::cerr << "hutch_bench: create with network none vs all, 50 kept alive, 2 rounds each\n";
    for (int round = 0; round < 4; ++round) {
      const bool all = round % 2 == 1;
      const json body = {{"network", {{"mode", all ? "all" : "none"}}}};
      std::vector<std::string> ids;
      for (int i = 0; i < 50; ++i) {
        auto t0 = Clock::now();
        auto r = c.Json("POST", "/v1/sandboxes", body);
        (all ? net_all_ms : net_none_ms).push_back(MsSince(t0));
        if (r.status != 201)
          throw std::runtime_error("create (network): HTTP " + std::to_string(r.status) + " " +
                                   r.body);
        ids.push_back(r.json().at("id").get<std::string>());
      }
      for (const auto& id : ids) DeleteSandbox(c, id);
    }
  }

  // 8: the vm driver (issue 9). Boot once, restore many: the first create
  // of a boot key (template image, memory, vCPUs, disk size) boots a QEMU
  // guest, saves it and restores from the save; later creates of the key
  // only restore. Cold rows: first creates of fresh keys (each run another
  // memory size), so each pays boot + save + restore. Restore rows: later
  // creates of one key. Fork: a running VM copied with its memory. TCG on
  // hosts without usable KVM. Few runs: each boot is seconds of CPU.
  std::vector<double> vm_cold_ms, vm_restore_ms, vm_exec_ms, vm_fork_ms, vm_net_ms;
  const json caps = c.Request("GET", "/healthz").json().value("capabilities", json::object());
  const json drivers = caps.value("drivers", json::array());
  const bool vm = std::find(drivers.begin(), drivers.end(), "vm") != drivers.end();
  std::string vm_note;
  if (vm) {
    vm_note = caps.value("vm_accel", std::string());
    auto create_vm = [&](int64_t memory_mb, std::vector<double>* ms, const char* network = "none") {
      const json body = {{"driver", "vm"},
                         {"memory_mb", memory_mb},
                         {"disk_mb", 256},
                         {"network", {{"mode", network}}}};
      auto t0 = Clock::now();
      auto r = c.Json("POST", "/v1/sandboxes", body);
      if (r.status != 201)
        throw std::runtime_error("create (vm): HTTP " + std::to_string(r.status) + " " + r.body);
      ms->push_back(MsSince(t0));
      return r.json().at("id").get<std::string>();
    };
    const int cold_runs = 3;
    std::cerr << "hutch_bench: vm first create of a key (boot + save + restore) x" << cold_runs
              << "\n";
    for (int i = 0; i < cold_runs; ++i) DeleteSandbox(c, create_vm(264 + 8 * i, &vm_cold_ms));
    const int runs = std::max(5, n / 2);
    std::cerr << "hutch_bench: vm create (restore to agent) x" << runs << "\n";
    (void)create_vm(256, &vm_cold_ms);  // the 256 MB key's own first create: saves it
    for (int i = 0; i < runs; ++i) {
      const std::string id = create_vm(256, &vm_restore_ms);
      auto t1 = Clock::now();
      Exec(c, id, {{"cmd", "echo hi"}}, std::string("hi\n"));
      vm_exec_ms.push_back(MsSince(t1));
      DeleteSandbox(c, id);
    }
    const int fork_runs = 3;
    std::cerr << "hutch_bench: vm fork x" << fork_runs << "\n";
    std::vector<double> ignored;
    const std::string src = create_vm(256, &ignored);
    for (int i = 0; i < fork_runs; ++i) {
      auto t0 = Clock::now();
      auto r = c.Json("POST", "/v1/sandboxes/" + src + "/fork", {{"count", 1}});
      if (r.status != 201)
        throw std::runtime_error("fork (vm): HTTP " + std::to_string(r.status) + " " + r.body);
      vm_fork_ms.push_back(MsSince(t0));
      DeleteSandbox(c, r.json().at("sandboxes").at(0).at("id").get<std::string>());
    }
    DeleteSandbox(c, src);
    if (networking) {
      // A guest with a network: its own key (the snapshot has a NIC), then
      // restores that add the tap and the slot namespace's rules.
      std::cerr << "hutch_bench: vm create with network all (restore to agent) x" << runs << "\n";
      DeleteSandbox(c, create_vm(256, &ignored, "all"));
      for (int i = 0; i < runs; ++i) DeleteSandbox(c, create_vm(256, &vm_net_ms, "all"));
    }
  }

  std::vector<Row> rows;
  if (vm) {
    const Stats cold = Summarize(vm_cold_ms), restore = Summarize(vm_restore_ms);
    rows.push_back({"vm_cold_to_agent",
                    "hutch vm: first create of a key (boot + save + restore -> agent)", cold,
                    vm_note});
    rows.push_back({"vm_restore_to_agent",
                    "hutch vm: create restored from the boot snapshot -> agent", restore, ""});
    Stats ratio = restore;
    ratio.p50 = restore.p50 > 0 ? cold.p50 / restore.p50 : 0;
    ratio.p99 = restore.p99 > 0 ? cold.p99 / restore.p99 : 0;
    ratio.min = ratio.max = 0;
    rows.push_back({"vm_cold_over_restore", "hutch vm: cold / restore (x, not ms)", ratio,
                    "p50 over p50, p99 over p99"});
    rows.push_back({"vm_first_exec", "hutch vm: first exec `echo hi` after restore",
                    Summarize(vm_exec_ms), ""});
    rows.push_back({"vm_fork",
                    "hutch vm: fork of a running VM, count 1 (save + copy disk + restore)",
                    Summarize(vm_fork_ms), ""});
    if (!vm_net_ms.empty())
      rows.push_back({"vm_restore_net_to_agent",
                      "hutch vm: restore with network all (tap, slot rules) -> agent",
                      Summarize(vm_net_ms), ""});
  }
  rows.push_back({"create_to_first_exec", "hutch: create -> first exec `echo hi` done",
                  Summarize(create_exec), "sequential, each deleted after (untimed)"});
  rows.push_back({"create_only", "  of which POST /v1/sandboxes", Summarize(create_only), ""});
  rows.push_back({"first_exec_only", "  of which first exec `echo hi`", Summarize(first_exec), ""});
  rows.push_back({"exec_round_trip", "hutch: exec round trip `true` (sh -c)", Summarize(rt_sh),
                  "one running sandbox, keep-alive"});
  rows.push_back({"exec_round_trip_argv", "hutch: exec round trip argv [/bin/true]",
                  Summarize(rt_argv), "same, no shell"});
  rows.push_back({"port_proxy_get", "hutch: GET /ports/8000/f.txt (python http.server)",
                  Summarize(rt_proxy), "keep-alive to hutchd"});
  rows.push_back({"exec_cat_same_file", "  vs exec argv [cat f.txt], same sandbox",
                  Summarize(rt_exec_cat), "interleaved with the row above"});
  for (const auto& b : baselines) rows.push_back(b.ToRow());
  rows.push_back({"snapshot", "hutch: snapshot (10 MB changed files)", Summarize(snap_ms),
                  "frozen while copied"});
  rows.push_back({"restore_to_first_exec", "hutch: create from snapshot -> first exec",
                  Summarize(restore_ms), ""});
  rows.push_back({"fork1_to_exec", "hutch: fork of 1 -> child answers exec", Summarize(fork1_ms),
                  "target p50 <= 50 ms"});
  rows.push_back({"fork5_to_exec", "hutch: fork of 5 -> all answer exec", Summarize(fork5_ms), ""});
  rows.push_back({"base_create_to_exec_paired", "hutch: create from base -> first exec (paired)",
                  Summarize(base_create_ms), ""});
  rows.push_back({"template_create_to_exec", "hutch: create from a built template -> first exec",
                  Summarize(tpl_create_ms), "target p50 <= 1.2x base (paired row above)"});
  rows.push_back({"template_cache_hit", "hutch: POST /v1/templates, unchanged spec (cache hit)",
                  Summarize(cache_hit_ms), "target < 1 s"});
  if (networking) {
    auto none = Summarize(net_none_ms), all = Summarize(net_all_ms);
    char ratio[64];
    snprintf(ratio, sizeof ratio, "p50 ratio all/none %.2f (target <= 1.5)", all.p50 / none.p50);
    rows.push_back({"create_net_none", "hutch: create, network none (50 kept alive)", none, ""});
    rows.push_back({"create_net_all", "hutch: create, network all (50 kept alive)", all, ratio});
  }

  // 5a: stream throughput. Counts decoded stdout bytes (text or b64), from
  // the request until the `exit` event; one run each. NUL bytes are valid
  // UTF-8, so /dev/zero goes out as JSON text of `\u0000` escapes (6 wire
  // bytes per byte); printable text is the other end of the range.
  std::vector<Throughput> tputs;
  {
    std::cerr << "hutch_bench: stream throughput\n";
    const uint64_t want = 200000000;
    struct StreamCase {
      std::string key, label, cmd;
    };
    const std::vector<StreamCase> cases = {
        {"stream_zero", "hutch: /exec/stream `head -c 200000000 /dev/zero`",
         "head -c " + std::to_string(want) + " /dev/zero"},
        {"stream_text", "hutch: /exec/stream 200 MB of `yes` text",
         "yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c " + std::to_string(want)},
    };
    for (const auto& sc_case : cases) {
      hutch::client::HttpClient sc = server.Client();
      uint64_t bytes = 0;
      int exit_code = -1;
      auto t0 = Clock::now();
      auto r = sc.Sse("/v1/sandboxes/" + sb + "/exec/stream",
                      {{"cmd", sc_case.cmd}, {"timeout_seconds", 0}},
                      [&](const hutch::client::SseEvent& ev) {
                        if (ev.event == "stdout") {
                          bytes += StdoutEventBytes(ev.data);
                        } else if (ev.event == "exit") {
                          exit_code = json::parse(ev.data).value("exit_code", -1);
                          return false;
                        } else if (ev.event == "error") {
                          throw std::runtime_error("stream error event: " + ev.data);
                        }
                        return true;
                      });
      double s = MsSince(t0) / 1000.0;
      if (r.status != 200 || exit_code != 0 || bytes != want)
        throw std::runtime_error("stream: HTTP " + std::to_string(r.status) + ", exit " +
                                 std::to_string(exit_code) + ", " + std::to_string(bytes) +
                                 " bytes " + r.body);
      tputs.push_back({sc_case.key, sc_case.label, static_cast<double>(bytes) / 1e6 / s, bytes, s,
                       std::nullopt, std::nullopt, "1 run; decoded stdout bytes counted"});
    }
  }

  // 5b: 100 MB upload then download, hutchd's peak RSS during each (VmHWM,
  // reset right before; a 5 ms VmRSS sampler backs it up if the reset is
  // refused).
  {
    std::cerr << "hutch_bench: file transfer\n";
    const uint64_t size = 100000000;
    const std::string path = "/v1/sandboxes/" + sb + "/fs?path=/tmp/bench.bin";
    std::vector<char> pattern(1 << 20);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (auto& ch : pattern) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      ch = static_cast<char>(x & 0xff);
    }

    auto measure = [&](const std::string& key, const std::string& label,
                       const std::function<uint64_t()>& body) {
      pid_t pid = server.pid();
      uint64_t before = ProcStatusBytes(pid, "VmRSS");
      bool reset = ResetPeakRss(pid);
      std::atomic<bool> stop{false};
      std::atomic<uint64_t> sampled{before};
      std::thread sampler([&] {
        while (!stop.load()) {
          uint64_t v = ProcStatusBytes(pid, "VmRSS");
          if (v > sampled.load()) sampled.store(v);
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      });
      auto t0 = Clock::now();
      uint64_t bytes = 0;
      try {
        bytes = body();
      } catch (...) {
        stop = true;
        sampler.join();
        throw;
      }
      double s = MsSince(t0) / 1000.0;
      stop = true;
      sampler.join();
      uint64_t peak =
          reset ? std::max(ProcStatusBytes(pid, "VmHWM"), sampled.load()) : sampled.load();
      Throughput t{key,
                   label,
                   static_cast<double>(bytes) / 1e6 / s,
                   bytes,
                   s,
                   peak,
                   before,
                   reset ? "peak = VmHWM after clear_refs" : "peak = sampled VmRSS (5 ms)"};
      tputs.push_back(t);
    };

    measure("upload", "hutch: PUT /fs 100 MB", [&] {
      hutch::client::HttpClient uc = server.Client();
      uint64_t off = 0;
      auto r = uc.Upload(path, size, [&](char* buf, size_t max) {
        size_t k = std::min<size_t>(max, pattern.size() - (off % pattern.size()));
        memcpy(buf, pattern.data() + (off % pattern.size()), k);
        off += k;
        return k;
      });
      if (r.status != 201)
        throw std::runtime_error("upload: HTTP " + std::to_string(r.status) + " " + r.body);
      return size;
    });
    measure("proxy_download", "hutch: GET /ports/8000/ 100 MB (http.server)", [&] {
      // The file PUT above, served by python's http.server and relayed.
      Exec(c, sb, {{"cmd", "ln -sf /tmp/bench.bin /tmp/www/bench.bin"}, {"timeout_seconds", 30}});
      hutch::client::HttpClient pc = server.Client();
      uint64_t got = 0;
      auto r = pc.Download("/v1/sandboxes/" + sb + "/ports/8000/bench.bin",
                           [&](const char*, size_t k) { got += k; });
      if (r.status != 200 || got != size)
        throw std::runtime_error("proxy download: HTTP " + std::to_string(r.status) + ", " +
                                 std::to_string(got) + " bytes " + r.body);
      return got;
    });
    measure("download", "hutch: GET /fs 100 MB", [&] {
      hutch::client::HttpClient dc = server.Client();
      uint64_t got = 0;
      auto r = dc.Download(path, [&](const char*, size_t k) { got += k; });
      if (r.status != 200 || got != size)
        throw std::runtime_error("download: HTTP " + std::to_string(r.status) + ", " +
                                 std::to_string(got) + " bytes " + r.body);
      return got;
    });
  }
  DeleteSandbox(c, sb);
  server.Stop();

  // 4: ratios and targets.
  auto find = [&](const std::string& key) -> std::optional<Stats> {
    for (const auto& r : rows)
      if (r.key == key) return r.stats;
    return std::nullopt;
  };
  auto ce = find("create_to_first_exec");
  auto rt = find("exec_round_trip");
  auto bw = find("bwrap_true");
  auto fe = find("fork_exec_true");
  auto us = find("unshare_true");
  std::optional<double> ratio_bwrap, ratio_fork, ratio_unshare;
  if (ce && bw && bw->p50 > 0) ratio_bwrap = ce->p50 / bw->p50;
  if (ce && fe && fe->p50 > 0) ratio_fork = ce->p50 / fe->p50;
  if (ce && us && us->p50 > 0) ratio_unshare = ce->p50 / us->p50;

  struct Target {
    std::string key, text;
    std::optional<bool> pass;  // nullopt: n/a
    std::string measured;
  };
  auto fmt_ratio = [](double r) {
    char b[32];
    snprintf(b, sizeof b, "%.2fx", r);
    return std::string(b);
  };
  std::vector<Target> targets = {
      {"create_exec_p50_le_20ms", "create -> first exec p50 <= 20 ms", ce->p50 <= 20.0,
       FmtMs(ce->p50) + " ms"},
      {"create_exec_p50_le_3x_bwrap", "create -> first exec p50 <= 3x bwrap p50",
       ratio_bwrap ? std::optional<bool>(*ratio_bwrap <= 3.0) : std::nullopt,
       ratio_bwrap ? fmt_ratio(*ratio_bwrap) : "n/a"},
      {"exec_round_trip_p50_le_2ms", "exec round trip p50 <= 2 ms", rt->p50 <= 2.0,
       FmtMs(rt->p50) + " ms"},
  };

  // ---- print
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M %Z", localtime(&now));
  struct utsname un {};
  uname(&un);
  unsigned ncpu = std::thread::hardware_concurrency();

  printf("\nhutch_bench  %s  N=%d  %u cpus  kernel %s\n\n", date, n, ncpu, un.release);
  printf("%-54s %6s %10s %10s  %s\n", "latency", "runs", "p50 ms", "p99 ms", "note");
  printf("%s\n", std::string(100, '-').c_str());
  for (const auto& r : rows) {
    if (r.stats)
      printf("%-54s %6zu %10s %10s  %s\n", r.label.c_str(), r.stats->runs,
             FmtMs(r.stats->p50).c_str(), FmtMs(r.stats->p99).c_str(), r.note.c_str());
    else printf("%-54s %6s %10s %10s  %s\n", r.label.c_str(), "-", "n/a", "n/a", r.note.c_str());
  }
  printf("\n%-54s %s\n", "ratio (p50 / p50)", "value");
  printf("%s\n", std::string(100, '-').c_str());
  printf("%-54s %s\n", "create -> first exec / bwrap",
         ratio_bwrap ? fmt_ratio(*ratio_bwrap).c_str() : "n/a");
  printf("%-54s %s\n", "create -> first exec / unshare",
         ratio_unshare ? fmt_ratio(*ratio_unshare).c_str() : "n/a");
  printf("%-54s %s\n", "create -> first exec / fork+exec",
         ratio_fork ? fmt_ratio(*ratio_fork).c_str() : "n/a");
  printf("\n%-54s %10s %8s %12s %12s  %s\n", "throughput", "MB/s", "seconds", "RSS before",
         "peak RSS", "note");
  printf("%s\n", std::string(100, '-').c_str());
  for (const auto& t : tputs) {
    printf("%-54s %10.1f %8.2f %12s %12s  %s\n", t.label.c_str(), t.mb_per_s, t.seconds,
           t.rss_before ? FmtMiB(*t.rss_before).c_str() : "-",
           t.peak_rss ? FmtMiB(*t.peak_rss).c_str() : "-", t.note.c_str());
  }
  printf("\n%-54s %10s  %s\n", "target", "measured", "result");
  printf("%s\n", std::string(100, '-').c_str());
  for (const auto& t : targets) {
    printf("%-54s %10s  %s\n", t.text.c_str(), t.measured.c_str(),
           !t.pass ? "n/a" : (*t.pass ? "PASS" : "MISS"));
  }
  printf(
      "\n(1 MB = 10^6 bytes; p99 interpolated between ranks, so at N=50 it lies between the two "
      "slowest runs)\n");
  fflush(stdout);

  if (!json_path.empty()) {
    json j;
    j["date"] = date;
    j["n"] = n;
    j["cpus"] = ncpu;
    j["kernel"] = un.release;
    j["latency"] = json::object();
    for (const auto& r : rows)
      j["latency"][r.key] = {{"label", r.label}, {"stats", StatsJson(r.stats)}, {"note", r.note}};
    j["ratios"] = {
        {"create_to_first_exec_over_bwrap", ratio_bwrap ? json(*ratio_bwrap) : json(nullptr)},
        {"create_to_first_exec_over_unshare", ratio_unshare ? json(*ratio_unshare) : json(nullptr)},
        {"create_to_first_exec_over_fork_exec", ratio_fork ? json(*ratio_fork) : json(nullptr)}};
    j["throughput"] = json::object();
    for (const auto& t : tputs) {
      j["throughput"][t.key] = {
          {"label", t.label},
          {"mb_per_s", t.mb_per_s},
          {"bytes", t.bytes},
          {"seconds", t.seconds},
          {"rss_before_bytes", t.rss_before ? json(*t.rss_before) : json(nullptr)},
          {"peak_rss_bytes", t.peak_rss ? json(*t.peak_rss) : json(nullptr)},
          {"note", t.note}};
    }
    j["targets"] = json::object();
    for (const auto& t : targets)
      j["targets"][t.key] = {{"text", t.text},
                             {"measured", t.measured},
                             {"result", !t.pass ? "n/a" : (*t.pass ? "PASS" : "MISS")}};
    std::ofstream out(json_path);
    out << j.dump(2) << "\n";
    if (!out) {
      std::cerr << "hutch_bench: cannot write " << json_path << "\n";
      return 1;
    }
    std::cerr << "hutch_bench: wrote " << json_path << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "hutch_bench: " << e.what() << "\n";
    return 1;
  }
}
