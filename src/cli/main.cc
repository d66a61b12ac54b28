// `hutch`: the command-line tool for people. A thin layer over the /v1 API
// through the shared C++ client (src/client).
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "cli/dockerfile.h"
#include "cli/mcp_bridge.h"
#include "cli/shell.h"
#include "cli/template_spec_file.h"
#include "client/http_client.h"

namespace {

using hutch::client::HttpClient;
using hutch::client::Response;
using nlohmann::json;

struct Global {
  std::string url = "http://127.0.0.1:8080";
  std::string key;
  bool json_out = false;
};

struct Endpoint {
  std::string host;
  int port = 8080;
};

bool ParseUrl(const std::string& url, Endpoint* ep) {
  std::string rest = url;
  const std::string scheme = "http://";
  if (rest.rfind(scheme, 0) == 0) rest = rest.substr(scheme.size());
  else if (rest.rfind("https://", 0) == 0) return false;
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  ep->host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      ep->port = std::stoi(rest.substr(colon + 1));
    } catch (...) {
      return false;
    }
  }
  if (ep->host == "localhost") ep->host = "127.0.0.1";
  return !ep->host.empty();
}

// One-line error with the server's stable code; exit status 1.
int Fail(const Response& r) {
  auto j = r.json();
  if (j.is_object() && j.contains("code"))
    std::cerr << "hutch: " << j.value("code", "") << ": " << j.value("message", "") << "\n";
  else std::cerr << "hutch: HTTP " << r.status << "\n";
  return 1;
}

std::string Enc(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char b[4];
      snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

bool SplitKv(const std::vector<std::string>& in, json* out) {
  for (const auto& kv : in) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "hutch: expected KEY=VALUE, got '" << kv << "'\n";
      return false;
    }
    (*out)[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return true;
}

// Set by SIGINT/SIGTERM during `exec`: shutting the socket down makes the
// blocking read return, the connection closes, and the server kills the
// command inside the sandbox.
std::atomic<int> g_exec_fd{-1};
std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) {
  g_interrupted = true;
  int fd = g_exec_fd.load();
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

class Progress {
 public:
  Progress(uint64_t total, bool enabled)
      : total_(total), enabled_(enabled && isatty(2) && total > (1u << 20)) {}
  void Add(uint64_t n) {
    done_ += n;
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100) && done_ < total_) return;
    last_ = now;
    int pct = total_ ? static_cast<int>(done_ * 100 / total_) : 100;
    int bars = pct / 4;
    fprintf(stderr, "\r[%-25s] %3d%% %llu/%llu MB",
            std::string(static_cast<size_t>(bars), '#').c_str(), pct,
            static_cast<unsigned long long>(done_ >> 20),
            static_cast<unsigned long long>(total_ >> 20));
  }
  ~Progress() {
    if (enabled_) fprintf(stderr, "\n");
  }

 private:
  uint64_t total_, done_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point last_{};
};

// What a subcommand's handler works with: the global options, the server
// and a client connected to it.
struct Session {
  const Global& g;
  const Endpoint& ep;
  HttpClient& c;
};

// A subcommand: CLI11's record of whether it was given, and its handler
// (bound to the options CLI11 parsed into).
struct Subcommand {
  CLI::App* cli;
  std::function<int(Session&)> run;
};

// --- global options

void AddGlobalOptions(CLI::App& app, Global& g) {
  if (const char* u = getenv("HUTCH_URL")) g.url = u;
  if (const char* k = getenv("HUTCH_API_KEY")) g.key = k;
  app.add_option("--url", g.url, "Server URL (env HUTCH_URL)");
  app.add_option("--key", g.key, "API key (env HUTCH_API_KEY)");
  app.add_flag("--json", g.json_out, "Machine-readable JSON output");
}

// --- serve: runs hutchd (no server to talk to yet)

struct Serve {
  CLI::App* cli;
  std::shared_ptr<std::vector<std::string>> args;
};

Serve AddServe(CLI::App& app) {
  Serve s{app.add_subcommand("serve", "Start hutchd (arguments after -- go to hutchd)"),
          std::make_shared<std::vector<std::string>>()};
  s.cli->add_option("args", *s.args);
  s.cli->allow_extras();
  return s;
}

int RunServe(const Serve& s) {
  std::string exe =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/hutchd";
  std::vector<std::string> args = {exe};
  for (auto& a : *s.args) args.push_back(a);
  for (auto& a : s.cli->remaining()) args.push_back(a);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  execv(exe.c_str(), av.data());
  perror("hutch: exec hutchd");
  return 1;
}

// --- create

// A vault's JSON from a file, or stdin for "-": never from an argument,
// which any process on the host could read in /proc/*/cmdline.
std::optional<std::string> ReadVaultFile(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "hutch: cannot read " << path << "\n";
      return std::nullopt;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

struct CreateArgs {
  std::string tpl = "base";
  std::string vault;  // a vault JSON file ('-': stdin)
  int64_t ttl = 0, memory = 0, disk = 0;
  double cpu = 0;
  std::vector<std::string> envs, metas, vol_mounts;
};

int RunCreate(Session& s, const CreateArgs& a) {
  json body = {{"template", a.tpl}};
  if (a.ttl) body["ttl_seconds"] = a.ttl;
  if (a.memory) body["memory_mb"] = a.memory;
  if (a.disk) body["disk_mb"] = a.disk;
  if (a.cpu > 0) body["cpu"] = a.cpu;
  json env = json::object(), meta = json::object();
  if (!SplitKv(a.envs, &env) || !SplitKv(a.metas, &meta)) return 2;
  if (!env.empty()) body["env"] = env;
  if (!meta.empty()) body["metadata"] = meta;
  if (!a.vault.empty()) {
    auto text = ReadVaultFile(a.vault);
    if (!text) return 2;
    body["vault"] = json::parse(*text, nullptr, false);
    if (body["vault"].is_discarded()) {
      std::cerr << "hutch: " << a.vault << " is not JSON\n";
      return 2;
    }
  }
  for (const auto& m : a.vol_mounts) {
    // NAME:/PATH or NAME:/PATH:ro
    size_t colon = m.find(':');
    std::string name = m.substr(0, colon),
                path = colon == std::string::npos ? "" : m.substr(colon + 1);
    bool ro = path.size() > 3 && path.compare(path.size() - 3, 3, ":ro") == 0;
    if (ro) path.resize(path.size() - 3);
    if (name.empty() || path.empty()) {
      std::cerr << "hutch: --volume wants NAME:/PATH[:ro], got '" << m << "'\n";
      return 2;
    }
    body["volumes"].push_back({{"name", name}, {"path", path}, {"read_only", ro}});
  }
  auto r = s.c.Json("POST", "/v1/sandboxes", body);
  if (r.status != 201) return Fail(r);
  if (s.g.json_out) std::cout << r.json().dump() << "\n";
  else std::cout << r.json()["id"].get<std::string>() << "\n";
  return 0;
}

Subcommand AddCreate(CLI::App& app) {
  auto a = std::make_shared<CreateArgs>();
  auto* create = app.add_subcommand("create", "Create a sandbox; prints its id");
  create->add_option("--template,-t", a->tpl, "Template");
  create->add_option("--ttl", a->ttl, "TTL in seconds");
  create->add_option("--memory", a->memory, "Memory limit, MB");
  create->add_option("--disk", a->disk, "Disk quota, MB");
  create->add_option("--cpu", a->cpu, "CPUs");
  create->add_option("--env,-e", a->envs, "KEY=VALUE (repeatable)");
  create->add_option("--meta,-m", a->metas, "Metadata KEY=VALUE (repeatable)");
  create->add_option("--volume,-v", a->vol_mounts, "NAME:/PATH[:ro] mounts a volume (repeatable)");
  create->add_option("--vault", a->vault, "Credential vault JSON file ('-': stdin)");
  return {create, [a](Session& s) { return RunCreate(s, *a); }};
}

// --- ls

int RunLs(Session& s, const std::string& status_filter) {
  json all = json::array();
  std::string cursor;
  do {
    std::string q = "/v1/sandboxes?limit=1000";
    if (!status_filter.empty()) q += "&status=" + Enc(status_filter);
    if (!cursor.empty()) q += "&cursor=" + Enc(cursor);
    auto r = s.c.Request("GET", q);
    if (r.status != 200) return Fail(r);
    auto j = r.json();
    for (auto& it : j["items"]) all.push_back(it);
    cursor = j["next_cursor"].is_string() ? j["next_cursor"].get<std::string>() : "";
  } while (!cursor.empty());
  if (s.g.json_out) {
    std::cout << all.dump() << "\n";
  } else {
    printf("%-22s %-9s %-10s %-26s %s\n", "ID", "STATUS", "TEMPLATE", "CREATED", "EXPIRES");
    for (auto& it : all)
      printf("%-22s %-9s %-10s %-26s %s\n", it.value("id", "").c_str(),
             it.value("status", "").c_str(), it.value("template", "").c_str(),
             it.value("created_at", "").c_str(), it.value("expires_at", "").c_str());
  }
  return 0;
}

Subcommand AddLs(CLI::App& app) {
  auto status_filter = std::make_shared<std::string>();
  auto* ls = app.add_subcommand("ls", "List sandboxes");
  ls->add_option("--status", *status_filter, "Only this status");
  return {ls, [status_filter](Session& s) { return RunLs(s, *status_filter); }};
}

// --- exec

struct ExecArgs {
  std::string id, user, cwd;
  int64_t timeout = 0;
  std::vector<std::string> cmd, env;
  bool background = false;
};

int RunExec(Session& s, const ExecArgs& a) {
  HttpClient& c = s.c;
  json body = {{"argv", a.cmd}};
  if (a.timeout) body["timeout_seconds"] = a.timeout;
  if (!a.user.empty()) body["user"] = a.user;
  if (!a.cwd.empty()) body["cwd"] = a.cwd;
  json env = json::object();
  if (!SplitKv(a.env, &env)) return 2;
  if (!env.empty()) body["env"] = env;
  if (a.background) {
    auto r = c.Json("POST", "/v1/sandboxes/" + Enc(a.id) + "/processes", body);
    if (r.status != 201) return Fail(r);
    if (s.g.json_out) std::cout << r.body << "\n";
    else std::cout << r.json().value("pid", 0) << "\n";
    return 0;
  }
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int exit_code = -1;
  std::string error;
  auto r = c.Sse(
      "/v1/sandboxes/" + Enc(a.id) + "/exec/stream", body, [&](const hutch::client::SseEvent& ev) {
        g_exec_fd = c.native_handle();
        auto d = json::parse(ev.data, nullptr, false);
        if (ev.event == "stdout" || ev.event == "stderr") {
          std::string bytes = d.contains("b64") ? hutch::client::Base64Decode(d.value("b64", ""))
                                                : d.value("text", "");
          FILE* f = ev.event == "stdout" ? stdout : stderr;
          fwrite(bytes.data(), 1, bytes.size(), f);
          fflush(f);
        } else if (ev.event == "exit") {
          exit_code = d.value("exit_code", -1);
          if (d.value("timed_out", false)) std::cerr << "hutch: command timed out\n";
          if (d.value("oom_killed", false))
            std::cerr << "hutch: command was killed: out of memory\n";
        } else if (ev.event == "error") {
          error = d.value("code", "") + ": " + d.value("message", "");
        }
        return !g_interrupted;
      });
  g_exec_fd = -1;
  if (g_interrupted) return 130;
  if (r.status != 200) return Fail(r);
  if (!error.empty()) {
    std::cerr << "hutch: " << error << "\n";
    return 1;
  }
  if (exit_code < 0) {
    std::cerr << "hutch: the stream ended without an exit status (sandbox or server died)\n";
    return 1;
  }
  return exit_code;
}

Subcommand AddExec(CLI::App& app) {
  auto a = std::make_shared<ExecArgs>();
  auto* exec = app.add_subcommand("exec", "Run a command, stream its output, exit with its code");
  exec->add_option("id", a->id, "Sandbox id")->required();
  exec->add_option("cmd", a->cmd, "Command and arguments (after --)")->required();
  exec->add_option("--timeout", a->timeout, "Seconds before the command is killed (0: 60)");
  exec->add_option("--user,-u", a->user, "User inside the sandbox");
  exec->add_option("--cwd,-w", a->cwd, "Working directory");
  exec->add_option("--env,-e", a->env, "KEY=VALUE (repeatable)");
  exec->add_flag("--background,-d", a->background,
                 "Start it in the background and print its pid (see hutch ps / hutch logs)");
  return {exec, [a](Session& s) { return RunExec(s, *a); }};
}

// --- run (the code interpreter of a code-interpreter sandbox)

struct RunArgs {
  std::string id, file, language, context, out_dir = ".";
  int64_t timeout = 0;
};

// Writes a base64 image or document of a result to out_dir/result-N.EXT.
bool SaveResultFile(const RunArgs& a, int n, const char* ext, const std::string& b64,
                    bool is_base64) {
  std::string bytes = b64;
  if (is_base64) {
    // Kernels wrap base64 in lines (Jupyter's image/png often ends in "\n").
    std::string packed;
    for (char c : b64)
      if (!isspace(static_cast<unsigned char>(c))) packed += c;
    try {
      bytes = hutch::client::Base64Decode(packed);
    } catch (const std::exception& e) {
      std::cerr << "hutch: result " << n << ": " << e.what() << "\n";
      return false;
    }
  }
  if (bytes.empty()) return false;
  const std::string path = a.out_dir + "/result-" + std::to_string(n) + "." + ext;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return false;
  std::cerr << "hutch: saved " << path << "\n";
  return true;
}

int RunCode(Session& s, const RunArgs& a) {
  std::string code;
  if (a.file == "-") {
    code.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) {
      std::cerr << "hutch: cannot read " << a.file << "\n";
      return 2;
    }
    code.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  json body = {{"code", code}};
  if (!a.language.empty()) body["language"] = a.language;
  if (!a.context.empty()) body["context_id"] = a.context;
  if (a.timeout > 0) body["timeout_ms"] = a.timeout * 1000;
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  bool ended = false, failed = false, timed_out = false;
  int n = 0;
  auto r =
      s.c.Sse("/v1/sandboxes/" + Enc(a.id) + "/code", body, [&](const hutch::client::SseEvent& ev) {
        g_exec_fd = s.c.native_handle();
        auto d = json::parse(ev.data, nullptr, false);
        if (ev.event == "stdout" || ev.event == "stderr") {
          FILE* f = ev.event == "stdout" ? stdout : stderr;
          const std::string t = d.value("text", "");
          fwrite(t.data(), 1, t.size(), f);
          fflush(f);
        } else if (ev.event == "result") {
          if (s.g.json_out) {
            std::cout << d.dump() << "\n";
            return !g_interrupted;
          }
          ++n;
          // Images and documents go to files, the text form
          // (the value of the last line) to stdout.
          static const std::tuple<const char*, const char*, bool> kFiles[] = {
              {"png", "png", true},
              {"jpeg", "jpg", true},
              {"pdf", "pdf", true},
              {"svg", "svg", false},
              {"html", "html", false}};
          bool saved = false;
          for (const auto& [key, ext, b64] : kFiles)
            if (d.contains(key) && d[key].is_string())
              saved |= SaveResultFile(a, n, ext, d[key], b64);
          if (d.contains("text") && (!saved || d.value("is_main_result", false)))
            std::cout << d.value("text", "") << "\n" << std::flush;
        } else if (ev.event == "error") {
          failed = true;
          const std::string tb = d.value("traceback", "");
          std::cerr << (tb.empty() ? d.value("name", "") + ": " + d.value("value", "") : tb)
                    << "\n";
        } else if (ev.event == "end") {
          ended = true;
          timed_out = d.value("timed_out", false);
        }
        return !g_interrupted;
      });
  g_exec_fd = -1;
  if (g_interrupted) return 130;
  if (r.status != 200) return Fail(r);
  if (!ended) {
    std::cerr << "hutch: the run's stream ended early (sandbox or server died)\n";
    return 1;
  }
  if (timed_out) return 124;
  return failed ? 1 : 0;
}

Subcommand AddRun(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand(
      "run", "Run code in a code-interpreter sandbox's stateful context (FILE or - for stdin)");
  run->add_option("id", a->id, "Sandbox id (from the code-interpreter template)")->required();
  run->add_option("file", a->file, "File with the code, or - to read stdin")->required();
  run->add_option("--lang,-l", a->language, "python (default), javascript, typescript, bash");
  run->add_option("--context,-c", a->context, "Context id (default: the language's own)");
  run->add_option("--timeout", a->timeout, "Seconds before the run is interrupted (state kept)");
  run->add_option("--out-dir,-o", a->out_dir,
                  "Where images and documents of results are saved (result-N.png, ...)")
      ->capture_default_str();
  return {run, [a](Session& s) { return RunCode(s, *a); }};
}

// --- cp

// ID:PATH names a file in a sandbox.
bool RemotePath(const std::string& s, std::string* id, std::string* path) {
  size_t colon = s.find(':');
  if (colon == std::string::npos || s.rfind("sb_", 0) != 0) return false;
  *id = s.substr(0, colon);
  *path = s.substr(colon + 1);
  return true;
}

int Upload(Session& s, const std::string& src, const std::string& id, const std::string& path) {
  std::ifstream in(src, std::ios::binary);
  if (!in) {
    std::cerr << "hutch: cannot read " << src << "\n";
    return 1;
  }
  uint64_t size = std::filesystem::file_size(src);
  Progress prog(size, !s.g.json_out);
  auto r = s.c.Upload("/v1/sandboxes/" + Enc(id) + "/fs?path=" + Enc(path), size,
                      [&](char* buf, size_t n) {
                        in.read(buf, static_cast<std::streamsize>(n));
                        size_t got = static_cast<size_t>(in.gcount());
                        prog.Add(got);
                        return got;
                      });
  if (r.status != 201) return Fail(r);
  if (s.g.json_out) std::cout << r.body;
  return 0;
}

// Written to DST.hutch-part, renamed to DST once complete.
int Download(Session& s, const std::string& id, const std::string& path, const std::string& dst) {
  std::string tmp = dst + ".hutch-part";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "hutch: cannot write " << dst << "\n";
    return 1;
  }
  uint64_t got = 0;
  auto r = s.c.Download("/v1/sandboxes/" + Enc(id) + "/fs?path=" + Enc(path),
                        [&](const char* b, size_t n) {
                          out.write(b, static_cast<std::streamsize>(n));
                          got += n;
                        });
  out.close();
  if (r.status != 200) {
    std::filesystem::remove(tmp);
    return Fail(r);
  }
  std::filesystem::rename(tmp, dst);
  if (s.g.json_out) std::cout << json{{"path", dst}, {"size", got}}.dump() << "\n";
  return 0;
}

int RunCp(Session& s, const std::string& src, const std::string& dst) {
  std::string id, path;
  if (RemotePath(dst, &id, &path)) return Upload(s, src, id, path);
  if (RemotePath(src, &id, &path)) return Download(s, id, path, dst);
  std::cerr << "hutch: one side of cp must be ID:PATH\n";
  return 2;
}

Subcommand AddCp(CLI::App& app) {
  auto a = std::make_shared<std::array<std::string, 2>>();  // {src, dst}
  auto* cp = app.add_subcommand("cp", "Copy a file: LOCAL ID:PATH or ID:PATH LOCAL");
  cp->add_option("src", (*a)[0])->required();
  cp->add_option("dst", (*a)[1])->required();
  return {cp, [a](Session& s) { return RunCp(s, (*a)[0], (*a)[1]); }};
}

// --- rm, volume rm, template rm: one DELETE per name

// DELETE prefix + name for each name; fails (after trying all) if any did.
int DeleteEach(Session& s, const std::string& prefix, const std::vector<std::string>& names) {
  int rc = 0;
  for (const auto& n : names) {
    auto r = s.c.Request("DELETE", prefix + Enc(n));
    if (r.status != 204) rc = Fail(r);
  }
  return rc;
}

Subcommand AddRm(CLI::App& app) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto* rm = app.add_subcommand("rm", "Delete sandboxes");
  rm->add_option("ids", *ids)->required();
  return {rm, [ids](Session& s) { return DeleteEach(s, "/v1/sandboxes/", *ids); }};
}

// --- shell

Subcommand AddShell(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* shell = app.add_subcommand("shell", "Interactive shell (needs the server's PTY support)");
  shell->add_option("id", *id)->required();
  return {shell, [id](Session& s) {
            return hutch::cli::RunShell(s.ep.host, s.ep.port, s.g.key, Enc(*id));
          }};
}

// --- ps

int RunPs(Session& s, const std::string& id) {
  auto r = s.c.Request("GET", "/v1/sandboxes/" + Enc(id) + "/processes");
  if (r.status != 200) return Fail(r);
  auto j = r.json();
  if (s.g.json_out) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("%-8s %-9s %-5s %s\n", "PID", "STATUS", "EXIT", "COMMAND");
  for (const auto& p : j["items"]) {
    std::string cmdline = p["cmd"].is_string() ? p["cmd"].get<std::string>() : "";
    if (cmdline.empty() && p["argv"].is_array())
      for (const auto& a : p["argv"])
        cmdline += (cmdline.empty() ? "" : " ") + a.get<std::string>();
    std::string code = p["exit_code"].is_number() ? std::to_string(p["exit_code"].get<int>()) : "-";
    std::printf("%-8d %-9s %-5s %s\n", p.value("pid", 0), p.value("status", "").c_str(),
                code.c_str(), cmdline.c_str());
  }
  return 0;
}

Subcommand AddPs(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* ps =
      app.add_subcommand("ps", "List a sandbox's processes (background ones and running commands)");
  ps->add_option("id", *id)->required();
  return {ps, [id](Session& s) { return RunPs(s, *id); }};
}

// --- logs

struct LogsArgs {
  std::string id;
  int64_t pid = 0, from = 0;
};

int RunLogs(Session& s, const LogsArgs& a) {
  int exit_code = -1;
  auto r = s.c.SseRequest(
      "GET",
      "/v1/sandboxes/" + Enc(a.id) + "/processes/" + std::to_string(a.pid) +
          "/stream?from=" + std::to_string(a.from),
      "", {}, [&](const hutch::client::SseEvent& e) {
        auto d = json::parse(e.data, nullptr, false);
        if (!d.is_object()) return true;
        if (e.event == "stdout" || e.event == "stderr") {
          std::string bytes = d.contains("b64") ? hutch::client::Base64Decode(d.value("b64", ""))
                                                : d.value("text", "");
          FILE* out = e.event == "stdout" ? stdout : stderr;
          std::fwrite(bytes.data(), 1, bytes.size(), out);
          std::fflush(out);
        } else if (e.event == "dropped") {
          std::fprintf(stderr, "hutch: [%s bytes of older output were dropped]\n",
                       d.value("dropped_bytes", json(0)).dump().c_str());
        } else if (e.event == "exit") {
          exit_code = d.value("exit_code", -1);
        } else if (e.event == "error") {
          std::cerr << "hutch: " << d.value("code", "") << ": " << d.value("message", "") << "\n";
        }
        return true;
      });
  if (r.status != 200) return Fail(r);
  return exit_code < 0 ? 1 : exit_code;
}

Subcommand AddLogs(CLI::App& app) {
  auto a = std::make_shared<LogsArgs>();
  auto* logs = app.add_subcommand(
      "logs", "Print a background process's output (buffered, then live until it exits)");
  logs->add_option("id", a->id, "Sandbox id")->required();
  logs->add_option("pid", a->pid, "Process id (see hutch ps)")->required();
  logs->add_option("--from", a->from, "Byte offset to start from (0: everything still buffered)");
  return {logs, [a](Session& s) { return RunLogs(s, *a); }};
}

// --- volume create | ls | rm

struct VolumeCreateArgs {
  std::string name;
  int64_t size = 0;
};

int RunVolumeCreate(Session& s, const VolumeCreateArgs& a) {
  json body = {{"name", a.name}};
  if (a.size) body["size_mb"] = a.size;
  auto r = s.c.Json("POST", "/v1/volumes", body);
  if (r.status != 201) return Fail(r);
  if (s.g.json_out) std::cout << r.json().dump() << "\n";
  else std::cout << a.name << "\n";
  return 0;
}

int RunVolumeLs(Session& s) {
  auto r = s.c.Request("GET", "/v1/volumes");
  if (r.status != 200) return Fail(r);
  auto vols = r.json()["volumes"];
  if (s.g.json_out) {
    std::cout << vols.dump() << "\n";
  } else {
    printf("%-24s %8s %12s %s\n", "NAME", "SIZE_MB", "USED_BYTES", "IN_USE_BY");
    for (auto& v : vols) {
      std::string users;
      for (auto& u : v["in_use_by"]) users += (users.empty() ? "" : ",") + u.get<std::string>();
      printf("%-24s %8lld %12llu %s\n", v.value("name", "").c_str(),
             static_cast<long long>(v.value("size_mb", int64_t{0})),
             static_cast<unsigned long long>(v.value("used_bytes", uint64_t{0})), users.c_str());
    }
  }
  return 0;
}

std::vector<Subcommand> AddVolume(CLI::App& app) {
  auto* vol = app.add_subcommand("volume", "Named volumes that outlive sandboxes");
  vol->require_subcommand(1);
  auto create = std::make_shared<VolumeCreateArgs>();
  auto* vol_create = vol->add_subcommand("create", "Create a volume");
  vol_create->add_option("name", create->name)->required();
  vol_create->add_option("--size-mb", create->size, "Size cap in MB (default: the server's)");
  auto* vol_ls = vol->add_subcommand("ls", "List volumes");
  auto rm_names = std::make_shared<std::vector<std::string>>();
  auto* vol_rm = vol->add_subcommand("rm", "Delete volumes (refused while a sandbox mounts one)");
  vol_rm->add_option("names", *rm_names)->required();
  return {{vol_create, [create](Session& s) { return RunVolumeCreate(s, *create); }},
          {vol_ls, [](Session& s) { return RunVolumeLs(s); }},
          {vol_rm, [rm_names](Session& s) { return DeleteEach(s, "/v1/volumes/", *rm_names); }}};
}

// --- vault show | set | rm (docs/api.md "Credential vault")

struct VaultArgs {
  std::string id, file, credential, binding;
};

int RunVaultShow(Session& s, const VaultArgs& a) {
  auto r = s.c.Request("GET", "/v1/sandboxes/" + Enc(a.id) + "/vault");
  if (r.status != 200) return Fail(r);
  std::cout << r.json().dump(s.g.json_out ? -1 : 2) << "\n";
  return 0;
}

int RunVaultSet(Session& s, const VaultArgs& a) {
  auto text = ReadVaultFile(a.file);
  if (!text) return 2;
  auto r = s.c.Request("PUT", "/v1/sandboxes/" + Enc(a.id) + "/vault", *text,
                       {{"Content-Type", "application/json"}});
  if (r.status != 200) return Fail(r);
  if (s.g.json_out) std::cout << r.json().dump() << "\n";
  return 0;
}

int RunVaultRm(Session& s, const VaultArgs& a) {
  if (a.credential.empty() == a.binding.empty()) {
    std::cerr << "hutch: give exactly one of --credential and --binding\n";
    return 2;
  }
  const std::string path =
      "/v1/sandboxes/" + Enc(a.id) + "/vault/" +
      (a.binding.empty() ? "credentials/" + Enc(a.credential) : "bindings/" + Enc(a.binding));
  auto r = s.c.Request("DELETE", path);
  return r.status == 204 ? 0 : Fail(r);
}

std::vector<Subcommand> AddVault(CLI::App& app) {
  auto* vault = app.add_subcommand(
      "vault", "A sandbox's credential vault: secrets added to its HTTPS requests at egress");
  vault->require_subcommand(1);
  auto a = std::make_shared<VaultArgs>();
  auto* show = vault->add_subcommand("show", "Print the vault's names and bindings (never values)");
  show->add_option("id", a->id)->required();
  auto* set = vault->add_subcommand("set", "Replace the vault whole from a JSON file ('-': stdin)");
  set->add_option("id", a->id)->required();
  set->add_option("file", a->file)->required();
  auto* rm =
      vault->add_subcommand("rm", "Delete a credential or a binding (injection stops at once)");
  rm->add_option("id", a->id)->required();
  rm->add_option("--credential", a->credential, "Credential name");
  rm->add_option("--binding", a->binding, "Binding name");
  return {{show, [a](Session& s) { return RunVaultShow(s, *a); }},
          {set, [a](Session& s) { return RunVaultSet(s, *a); }},
          {rm, [a](Session& s) { return RunVaultRm(s, *a); }}};
}

// --- template build | list | show | rm | alias

int PostTemplateBuild(Session& s, const std::string& body, const std::string& name, bool verbose);

// Builds the template of the spec at spec_path (registered as `name`, or
// the spec's own when empty), following the build's progress.
int BuildTemplate(Session& s, const std::string& spec_path, const std::string& name, bool verbose,
                  int depth) {
  HttpClient& c = s.c;
  auto body = hutch::cli::LoadTemplateSpec(spec_path);
  if (!body) return 2;
  // A parent template that is not built yet is built first from the
  // spec of that name beside this one (python.toml -> debian.toml).
  std::string from = json::parse(*body, nullptr, false).value("from", "");
  if (!from.empty() && from.rfind("debian:", 0) != 0 && depth < 8) {
    std::string sibling =
        (std::filesystem::absolute(spec_path).parent_path() / (from + ".toml")).string();
    if (std::filesystem::exists(sibling) &&
        c.Request("GET", "/v1/templates/" + Enc(from)).status == 404) {
      std::cerr << "hutch: building '" << from << "' first (" << sibling << ")\n";
      if (int rc = BuildTemplate(s, sibling, "", verbose, depth + 1); rc != 0) return rc;
    }
  }
  return PostTemplateBuild(s, *body, name, verbose);
}

// Sends a spec (JSON text) to the server and follows the build's progress.
int PostTemplateBuild(Session& s, const std::string& body, const std::string& name, bool verbose) {
  HttpClient& c = s.c;
  std::string target = "/v1/templates";
  if (!name.empty()) target += "?name=" + Enc(name);
  hutch::cli::BuildProgress bar(!s.g.json_out, verbose);
  json done, error;
  auto r = c.SseRequest("POST", target, body,
                        {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}},
                        [&](const hutch::client::SseEvent& e) {
                          auto d = json::parse(e.data, nullptr, false);
                          if (!d.is_object()) return true;
                          if (e.event == "step") bar.Step(d);
                          else if (e.event == "log") bar.Log(d);
                          else if (e.event == "done") done = d;
                          else if (e.event == "error") error = d;
                          return true;
                        });
  bar.Finish();
  if (r.status != 200) return Fail(r);
  if (!error.is_null()) {
    std::cerr << "hutch: template build failed: " << error.value("message", "") << "\n";
    if (error.value("exit_code", -1) >= 0)
      std::cerr << "hutch: step " << error.value("step", 0) << " (" << error.value("name", "")
                << ") exited with " << error.value("exit_code", -1) << "; last output:\n";
    std::cerr << error.value("log_tail", "");
    return 1;
  }
  if (done.is_null()) {
    std::cerr << "hutch: the build stream ended without a result (server died?)\n";
    return 1;
  }
  if (s.g.json_out) {
    std::cout << done.dump() << "\n";
  } else {
    const json& t = done["template"];
    std::printf("%s %s (%s, %.1f s)\n", t.value("name", "").c_str(),
                t.value("hash", "").substr(0, 12).c_str(),
                done.value("cached", false) ? "cached" : "built",
                static_cast<double>(done.value("duration_ms", int64_t{0})) / 1000.0);
  }
  return 0;
}

int RunTemplateList(Session& s) {
  auto r = s.c.Request("GET", "/v1/templates");
  if (r.status != 200) return Fail(r);
  auto j = r.json();
  if (s.g.json_out) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("%-20s %-12s %-18s %10s  %s\n", "NAME", "HASH", "FROM", "SIZE_MB", "BUILT");
  for (const auto& t : j["items"])
    std::printf("%-20s %-12s %-18s %10.1f  %s\n", t.value("name", "").c_str(),
                t.value("hash", "").substr(0, 12).c_str(), t.value("from", "").c_str(),
                static_cast<double>(t.value("size_bytes", uint64_t{0})) / (1 << 20),
                t.value("built_at", "").c_str());
  if (j["aliases"].is_object() && !j["aliases"].empty()) {
    std::printf("\n%-20s %s\n", "ALIAS", "TEMPLATE");
    for (const auto& [k, v] : j["aliases"].items())
      std::printf("%-20s %s\n", k.c_str(), v.get<std::string>().c_str());
  }
  return 0;
}

int RunTemplateShow(Session& s, const std::string& name) {
  auto r = s.c.Request("GET", "/v1/templates/" + Enc(name));
  if (r.status != 200) return Fail(r);
  std::cout << r.json().dump(s.g.json_out ? -1 : 2) << "\n";
  return 0;
}

struct AliasArgs {
  std::string name, target;
  bool rm = false;
};

int RunTemplateAlias(Session& s, const AliasArgs& a) {
  if (a.rm) {
    auto r = s.c.Request("DELETE", "/v1/template-aliases/" + Enc(a.name));
    return r.status == 204 ? 0 : Fail(r);
  }
  if (a.target.empty()) {
    std::cerr << "hutch: template alias NAME TEMPLATE (or --rm NAME)\n";
    return 2;
  }
  auto r = s.c.Json("PUT", "/v1/template-aliases/" + Enc(a.name), json{{"template", a.target}});
  if (r.status != 200) return Fail(r);
  if (s.g.json_out) std::cout << r.body << "\n";
  return 0;
}

struct TemplateBuildArgs {
  std::string spec, name;
  std::string dockerfile;               // -f: build from a Dockerfile; `spec` is then its context
  std::vector<std::string> build_args;  // --build-arg NAME=VALUE
  bool verbose = false;
};

// `hutch template build -f Dockerfile [CONTEXT] --name NAME`: the
// Dockerfile as a spec with ordered steps (cli/dockerfile.h), COPY sources
// read from CONTEXT (default: the Dockerfile's directory).
int BuildDockerfile(Session& s, const TemplateBuildArgs& a) {
  if (a.name.empty()) {
    std::cerr << "hutch: --name is required with -f (a Dockerfile names no template)\n";
    return 2;
  }
  hutch::cli::DockerfileInput in;
  std::ifstream f(a.dockerfile, std::ios::binary);
  if (!f) {
    std::cerr << "hutch: cannot read " << a.dockerfile << "\n";
    return 2;
  }
  std::ostringstream text;
  text << f.rdbuf();
  in.text = text.str();
  in.name = a.name;
  in.context =
      a.spec.empty() ? std::filesystem::absolute(a.dockerfile).parent_path().string() : a.spec;
  for (const auto& kv : a.build_args) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "hutch: --build-arg takes NAME=VALUE (got '" << kv << "')\n";
      return 2;
    }
    in.build_args[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // FROM names a template of this server (or an alias) when it has one.
  in.is_template = [&s](const std::string& ref) {
    return s.c.Request("GET", "/v1/templates/" + Enc(ref)).status == 200;
  };
  auto spec = hutch::cli::DockerfileToSpec(in);
  for (const auto& w : spec.warnings) std::cerr << "hutch: " << a.dockerfile << ": " << w << "\n";
  if (!spec.spec) {
    std::cerr << "hutch: " << a.dockerfile << ": " << spec.error << "\n";
    return 2;
  }
  return PostTemplateBuild(s, spec.spec->dump(), "", a.verbose);
}

std::vector<Subcommand> AddTemplate(CLI::App& app) {
  auto* tmpl = app.add_subcommand("template", "Templates: build from a spec, list, remove, alias");
  tmpl->require_subcommand(1);
  auto build = std::make_shared<TemplateBuildArgs>();
  auto* tmpl_build =
      tmpl->add_subcommand("build", "Build a template from a spec file (TOML or JSON)");
  tmpl_build->add_option("spec", build->spec,
                         "Spec file (templates/*.toml); with -f, the build context directory");
  tmpl_build->add_option("-f,--file", build->dockerfile,
                         "Build from this Dockerfile (FROM, RUN, COPY, ENV, WORKDIR, USER, ARG, "
                         "CMD, ENTRYPOINT) instead of a spec");
  tmpl_build->add_option("--build-arg", build->build_args, "A Dockerfile ARG's value, NAME=VALUE");
  tmpl_build->add_option("--name", build->name,
                         "Register it under this name instead of the spec's");
  tmpl_build->add_flag("-v,--verbose", build->verbose, "Print every log line of the build");
  auto* tmpl_ls = tmpl->add_subcommand("list", "List templates and aliases");
  tmpl_ls->alias("ls");
  auto show_name = std::make_shared<std::string>();
  auto* tmpl_show = tmpl->add_subcommand("show", "Show a template (its spec and defaults)");
  tmpl_show->add_option("name", *show_name)->required();
  auto rm_names = std::make_shared<std::vector<std::string>>();
  auto* tmpl_rm =
      tmpl->add_subcommand("rm", "Remove templates (their files go once no sandbox uses them)");
  tmpl_rm->add_option("names", *rm_names)->required();
  auto alias = std::make_shared<AliasArgs>();
  auto* tmpl_alias = tmpl->add_subcommand("alias", "Point an alias at a template (or --rm it)");
  tmpl_alias->add_option("name", alias->name)->required();
  tmpl_alias->add_option("template", alias->target);
  tmpl_alias->add_flag("--rm", alias->rm, "Remove the alias");
  return {{tmpl_build,
           [build](Session& s) {
             if (!build->dockerfile.empty()) return BuildDockerfile(s, *build);
             if (build->spec.empty()) {
               std::cerr << "hutch: template build needs a spec file (or -f Dockerfile)\n";
               return 2;
             }
             return BuildTemplate(s, build->spec, build->name, build->verbose, 0);
           }},
          {tmpl_ls, [](Session& s) { return RunTemplateList(s); }},
          {tmpl_show, [show_name](Session& s) { return RunTemplateShow(s, *show_name); }},
          {tmpl_rm, [rm_names](Session& s) { return DeleteEach(s, "/v1/templates/", *rm_names); }},
          {tmpl_alias, [alias](Session& s) { return RunTemplateAlias(s, *alias); }}};
}

}  // namespace

// --- mcp: the stdio bridge, and client config snippets

struct McpArgs {
  CLI::App* cli;
  CLI::App* config;
  std::shared_ptr<std::string> client;
};

McpArgs AddMcp(CLI::App& app) {
  McpArgs a{app.add_subcommand("mcp",
                               "MCP server over stdio, bridged to hutchd's /mcp (for clients that "
                               "launch a command)"),
            nullptr, std::make_shared<std::string>()};
  a.config = a.cli->add_subcommand("config", "Print the MCP config snippet of a client");
  a.config->add_option("client", *a.client, "claude, claude-code, cursor or vscode")->required();
  return a;
}

int RunMcp(const McpArgs& a, const Global& g, const Endpoint& ep) {
  if (a.config->parsed()) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string out = hutch::cli::McpConfigSnippet(*a.client, g.url, g.key, self);
    if (out.empty()) {
      std::cerr << "hutch: unknown client '" << *a.client
                << "' (claude, claude-code, cursor, vscode)\n";
      return 2;
    }
    std::cout << out;
    return 0;
  }
  return hutch::cli::RunMcpBridge(ep.host, ep.port, g.key);
}

int main(int argc, char** argv) {
  CLI::App app{"hutch: command-line client of a hutchd server"};
  app.require_subcommand(1);
  Global g;
  AddGlobalOptions(app, g);
  const Serve serve = AddServe(app);
  const McpArgs mcp = AddMcp(app);
  std::vector<Subcommand> commands = {AddCreate(app), AddLs(app), AddExec(app),
                                      AddRun(app),    AddCp(app), AddRm(app),
                                      AddShell(app),  AddPs(app), AddLogs(app)};
  for (auto& group : {AddVolume(app), AddVault(app), AddTemplate(app)})
    commands.insert(commands.end(), group.begin(), group.end());

  CLI11_PARSE(app, argc, argv);

  if (serve.cli->parsed()) return RunServe(serve);
  Endpoint ep;
  if (!ParseUrl(g.url, &ep)) {
    std::cerr << "hutch: unsupported URL '" << g.url << "' (http://HOST:PORT)\n";
    return 2;
  }
  if (mcp.cli->parsed()) return RunMcp(mcp, g, ep);
  HttpClient c(ep.host, ep.port, g.key);
  Session session{g, ep, c};
  try {
    for (const auto& cmd : commands) {
      if (cmd.cli->parsed()) return cmd.run(session);
    }
  } catch (const std::exception& e) {
    std::cerr << "hutch: cannot reach " << g.url << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
