#include "core/debootstrap.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "common/subprocess.h"
#include "core/template_spec.h"

namespace hutch {
namespace fs = std::filesystem;

namespace {

struct AptSource {
  std::string uri;
  std::vector<std::string> suites;
  bool deb = false;
};

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// One-line format: deb [opts] URI SUITE COMPONENTS...
void ParseList(const std::string& text, std::vector<AptSource>* out) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    auto w = Words(line);
    if (w.size() < 3 || w[0] != "deb") continue;
    size_t i = 1;
    if (w[i].front() == '[') {
      while (i < w.size() && w[i].back() != ']') ++i;
      ++i;
    }
    if (i + 1 >= w.size()) continue;
    out->push_back({w[i], {w[i + 1]}, true});
  }
}

// deb822 format (*.sources): stanzas of "Key: value" lines.
void ParseDeb822(const std::string& text, std::vector<AptSource>* out) {
  std::istringstream in(text);
  AptSource cur;
  std::vector<std::string> uris;
  bool enabled = true;
  auto flush = [&]() {
    if (cur.deb && enabled)
      for (const auto& u : uris) out->push_back({u, cur.suites, true});
    cur = AptSource{};
    uris.clear();
    enabled = true;
  };
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') continue;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      flush();
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string::npos || line[0] == ' ') continue;
    std::string key = line.substr(0, colon), val = line.substr(colon + 1);
    if (key == "Types") {
      for (const auto& t : Words(val)) cur.deb |= t == "deb";
    } else if (key == "URIs") {
      uris = Words(val);
    } else if (key == "Suites") {
      cur.suites = Words(val);
    } else if (key == "Enabled") {
      enabled = Words(val) != std::vector<std::string>{"no"};
    }
  }
  flush();
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint32_t g_uid_base = 0;

int ShiftOne(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_NS) return 0;
  auto shift = [](uint32_t id) -> uint32_t {
    if (id >= g_uid_base && id - g_uid_base < 65536) return id;  // mapped already
    return id < 65536 ? id + g_uid_base : g_uid_base + 65534;
  };
  const uid_t u = shift(st->st_uid);
  const gid_t g = shift(st->st_gid);
  if (lchown(path, u, g) != 0) return -1;
  // chown already cleared setuid/setgid on regular files; directories keep
  // setgid (harmless), symlinks have no mode.
  if (S_ISREG(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)))
    if (chmod(path, st->st_mode & 01777 & ~(S_ISUID | S_ISGID)) != 0) return -1;
  return 0;
}

}  // namespace

bool ValidDebianMirror(const std::string& url) {
  if (url.size() > 1024) return false;
  size_t at;
  if (url.rfind("http://", 0) == 0) {
    at = 7;
  } else if (url.rfind("https://", 0) == 0) {
    at = 8;
  } else {
    return false;
  }
  const size_t slash = url.find('/', at);
  if (slash == std::string::npos || slash == at || slash + 1 == url.size())
    return false;  // a host and a path
  const std::string host = url.substr(at, slash - at);
  if (host[0] == '-' || host[0] == '.' || host[0] == ':') return false;
  for (char c : host)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' ||
          c == ']'))
      return false;
  for (size_t i = slash; i < url.size(); ++i) {
    const char c = url[i];
    if (!(isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("/-._~%+:,=").find(c) != std::string_view::npos))
      return false;
  }
  return true;
}

namespace {

std::vector<AptSource> ReadAptSources(const std::string& apt_dir) {
  std::vector<AptSource> all;
  std::error_code ec;
  if (fs::exists(apt_dir + "/sources.list", ec)) ParseList(Slurp(apt_dir + "/sources.list"), &all);
  std::vector<fs::path> parts;
  for (const auto& e : fs::directory_iterator(apt_dir + "/sources.list.d", ec))
    parts.push_back(e.path());
  std::sort(parts.begin(), parts.end());
  for (const auto& p : parts) {
    if (p.extension() == ".list") ParseList(Slurp(p), &all);
    if (p.extension() == ".sources") ParseDeb822(Slurp(p), &all);
  }
  return all;
}

}  // namespace

std::vector<std::string> AptSourceHosts(const std::string& apt_dir) {
  std::vector<std::string> hosts;
  for (const auto& s : ReadAptSources(apt_dir)) {
    if (!ValidDebianMirror(s.uri)) continue;
    const size_t at = s.uri.find("://") + 3;
    std::string host = s.uri.substr(at, s.uri.find('/', at) - at);
    if (!host.empty() && host[0] == '[') continue;  // IPv6: sandboxes have none
    if (auto colon = host.find(':'); colon != std::string::npos) host.resize(colon);
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

Result<std::string> FindDebianMirror(const std::string& suite, const std::string& apt_dir) {
  const std::vector<AptSource> all = ReadAptSources(apt_dir);
  // Only a URI that passes the mirror grammar reaches debootstrap's
  // command line (file: sources, and anything odd, are skipped).
  auto is_main_archive = [](const AptSource& s) {
    for (const auto& su : s.suites)
      if (su.find('/') != std::string::npos || su.find("security") != std::string::npos)
        return false;
    return ValidDebianMirror(s.uri);
  };
  for (const auto& s : all)
    if (is_main_archive(s) && std::find(s.suites.begin(), s.suites.end(), suite) != s.suites.end())
      return s.uri;
  // No source names this suite: the archive that serves the host's own
  // Debian suites serves the others too.
  for (const auto& s : all)
    if (is_main_archive(s) && s.uri.find("debian") != std::string::npos) return s.uri;
  return MakeError(Code::kInvalidRequest,
                   "no Debian mirror for '" + suite + "' in " + apt_dir +
                       "/sources.list(.d): debian:<suite> templates use the host's apt mirror");
}

asio::awaitable<Result<int>> RunDebootstrap(
    const std::string& suite, const std::string& target, const std::string& mirror,
    uint32_t uid_base, std::function<asio::awaitable<void>(std::string_view)> on_output,
    const std::string& tool) {
  // The spec's grammar and FindDebianMirror already hold these; checked
  // again where they meet a root command line.
  if (!ValidDebianSuite(suite))
    co_return MakeError(Code::kInvalidRequest,
                        "'from': '" + suite + "' is not a Debian suite name");
  if (!ValidDebianMirror(mirror))
    co_return MakeError(Code::kInvalidRequest,
                        "mirror: '" + mirror + "' is not an http(s) mirror URL");
  if (uid_base < 65536)
    co_return MakeError(Code::kInternal, "debootstrap needs a sandbox uid range above 65535");
  if (access(tool.c_str(), X_OK) != 0)
    co_return MakeError(Code::kNotSupported,
                        "debootstrap is not installed on this host (scripts/setup installs it)");
  // The target belongs to the namespace's root: the only place it writes.
  std::error_code ec;
  fs::create_directories(target, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + target + ": " + ec.message());
  if (chown(target.c_str(), uid_base, uid_base) != 0 || chmod(target.c_str(), 0755) != 0)
    co_return ErrnoError("give " + target + " to the sandbox range");
  // Inside the user namespace: a private mount namespace of its own (its
  // /proc and /dev mounts in the target go with it) and a pid namespace
  // (maintainer scripts' leftovers die with it). `--` ends unshare's
  // options; debootstrap takes no `--` (it refuses it as an unknown
  // option), so its positional arguments rest on the grammars above.
  std::vector<std::string> argv = {"/usr/bin/unshare",
                                   "--mount",
                                   "--pid",
                                   "--fork",
                                   "--propagation",
                                   "private",
                                   "--",
                                   tool,
                                   "--variant=minbase",
                                   "--include=ca-certificates",
                                   suite,
                                   kToolWorkdir,
                                   mirror};
  // container=lxc: debootstrap then binds the host's /dev/null & co. into
  // the target instead of mknod, which a user namespace may not do.
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
                                  "DEBIAN_FRONTEND=noninteractive", "container=lxc"};
  const ToolUserNamespace userns{uid_base, 65536, target};
  co_return co_await RunToolStreaming(argv, env, std::chrono::minutes(30), std::move(on_output),
                                      &userns);
}

Status ShiftRootOwners(const std::string& root, uint32_t uid_base) {
  std::error_code ec;
  // /dev: the sandbox mounts its own; no device node stays in a template.
  for (const auto& e : fs::directory_iterator(root + "/dev", ec)) {
    std::error_code rec;
    fs::remove_all(e.path(), rec);
  }
  g_uid_base = uid_base;  // nftw has no user pointer; builds run on one thread
  if (nftw(root.c_str(), ShiftOne, 64, FTW_PHYS) != 0)
    return ErrnoError("shift owners under " + root);
  return Status{};
}

}  // namespace hutch
