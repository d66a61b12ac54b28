#include "agent/passwd.h"

#include <charconv>
#include <fstream>
#include <optional>
#include <vector>

namespace hutch::agent {

namespace {

// The ids the sandbox's user namespace maps (jail: 65536 from uid_base; the
// vm guest uses the same range). Anything past it is no user of the
// sandbox, and (uid_t)-1 is worse: setresuid(-1, -1, -1) changes nothing,
// so a command "as 4294967295" kept the agent's root (issue 32).
constexpr uint32_t kMaxId = 65535;

std::optional<uint32_t> ParseId(const std::string& s) {
  uint32_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses "name:x:uid:gid:gecos:home:shell"; nullopt for malformed lines.
std::optional<User> ParseLine(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    size_t colon = line.find(':', start);
    f.push_back(line.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (f.size() < 7) return std::nullopt;
  auto uid = ParseId(f[2]);
  auto gid = ParseId(f[3]);
  if (!uid || !gid || f[0].empty()) return std::nullopt;
  User u;
  u.name = f[0];
  u.uid = *uid;
  u.gid = *gid;
  u.home = f[5].empty() ? "/" : f[5];
  u.shell = f[6].empty() ? "/bin/sh" : f[6];
  return u;
}

}  // namespace

Result<User> LookupUser(const std::string& name_or_uid, const std::string& passwd_path) {
  const std::string want = name_or_uid.empty() ? "root" : name_or_uid;
  const auto want_uid = ParseId(want);
  if (!want_uid && !want.empty() && want.find_first_not_of("0123456789") == std::string::npos)
    return MakeError(
        Code::kInvalidRequest,
        "user id " + want + " is outside the sandbox's range 0.." + std::to_string(kMaxId));
  if (want_uid && *want_uid > kMaxId)
    return MakeError(
        Code::kInvalidRequest,
        "user id " + want + " is outside the sandbox's range 0.." + std::to_string(kMaxId));
  std::ifstream in(passwd_path);
  std::string line;
  while (in && std::getline(in, line)) {
    auto u = ParseLine(line);
    if (!u) continue;
    if (want_uid ? u->uid == *want_uid : u->name == want) {
      // /etc/passwd is the sandbox's to write: its ids are checked too.
      if (u->uid > kMaxId || u->gid > kMaxId)
        return MakeError(
            Code::kInvalidRequest,
            "user " + want + " has an id outside the sandbox's range 0.." + std::to_string(kMaxId));
      return *u;
    }
  }
  if (want_uid) {
    User u;
    u.name = want;
    u.uid = *want_uid;
    u.gid = *want_uid;
    return u;
  }
  // A minimal rootfs may lack /etc/passwd; root must still work.
  if (want == "root") {
    User u;
    u.name = "root";
    u.home = "/root";
    return u;
  }
  return MakeError(Code::kInvalidRequest, "unknown user " + want);
}

}  // namespace hutch::agent
