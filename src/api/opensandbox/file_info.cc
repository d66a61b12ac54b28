#include "api/opensandbox/file_info.h"

#include <sstream>

#include "core/file_ops.h"

namespace hutch::api::opensandbox {

namespace {

// /etc/passwd and /etc/group are small; a bigger one is not worth reading.
constexpr int64_t kMaxIdFile = 1 << 20;

Result<int64_t> IdOf(const std::map<int64_t, std::string>& m, const std::string& name,
                     const char* what) {
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
      name.size() < 10)
    return std::stoll(name);
  for (const auto& [id, n] : m)
    if (n == name) return id;
  return MakeError(Code::kInvalidRequest,
                   std::string("unknown ") + what + " '" + name + "' in the sandbox");
}

}  // namespace

int OctalDigits(int mode) {
  int out = 0, scale = 1;
  for (int m = mode & 07777; m > 0; m /= 8, scale *= 10) out += (m % 8) * scale;
  return out;
}

Result<int> ModeFromOctalDigits(int64_t digits) {
  if (digits < 0 || digits > 7777)
    return MakeError(Code::kInvalidRequest, "mode must be octal digits, 0 to 7777");
  int mode = 0, scale = 1;
  for (int64_t d = digits; d > 0; d /= 10, scale *= 8) {
    if (d % 10 > 7)
      return MakeError(Code::kInvalidRequest, "mode " + std::to_string(digits) + " is not octal");
    mode += static_cast<int>(d % 10) * scale;
  }
  return mode;
}

std::map<int64_t, std::string> IdNames::Parse(const std::string& text) {
  std::map<int64_t, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    if (a == std::string::npos || a == 0) continue;
    const size_t b = line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const size_t c = line.find(':', b + 1);
    const std::string id =
        line.substr(b + 1, c == std::string::npos ? std::string::npos : c - b - 1);
    if (id.empty() || id.size() > 10 || id.find_first_not_of("0123456789") != std::string::npos)
      continue;
    out.emplace(std::stoll(id), line.substr(0, a));  // the first name of an id wins
  }
  return out;
}

std::string IdNames::User(int64_t uid) const {
  auto it = users.find(uid);
  return it == users.end() ? std::to_string(uid) : it->second;
}

std::string IdNames::Group(int64_t gid) const {
  auto it = groups.find(gid);
  return it == groups.end() ? std::to_string(gid) : it->second;
}

Result<int64_t> IdNames::UserId(const std::string& name) const { return IdOf(users, name, "user"); }
Result<int64_t> IdNames::GroupId(const std::string& name) const {
  return IdOf(groups, name, "group");
}

asio::awaitable<IdNames> LoadIdNames(std::shared_ptr<Sandbox> sb) {
  IdNames n;
  // Missing or unreadable files leave ids unnamed: names are a courtesy.
  const std::string passwd_path = "/etc/passwd", group_path = "/etc/group", root = "root";
  if (auto p = co_await ReadWholeFile(sb, passwd_path, root, kMaxIdFile); p.ok())
    n.users = IdNames::Parse(*p);
  if (auto g = co_await ReadWholeFile(sb, group_path, root, kMaxIdFile); g.ok())
    n.groups = IdNames::Parse(*g);
  co_return n;
}

nlohmann::json FileInfoJson(const nlohmann::json& e, const IdNames& names) {
  const std::string type = e.value("type", "other");
  const std::string mtime = e.value("mtime", "");
  return {{"path", e.value("path", "")},
          {"type", type == "dir" ? "directory" : type},
          {"size", e.value("size", int64_t{0})},
          {"modified_at", mtime},
          // Linux keeps no creation time that every filesystem reports.
          {"created_at", mtime},
          {"owner", names.User(e.value("uid", int64_t{0}))},
          {"group", names.Group(e.value("gid", int64_t{0}))},
          {"mode", OctalDigits(e.value("mode", 0))}};
}

std::string SliceLines(std::string_view text, int64_t offset, std::optional<int64_t> limit) {
  size_t pos = 0;
  for (int64_t line = 1; line < offset && pos < text.size(); ++line) {
    const size_t nl = text.find('\n', pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  size_t end = pos;
  for (int64_t n = 0; (!limit || n < *limit) && end < text.size(); ++n) {
    const size_t nl = text.find('\n', end);
    end = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return std::string(text.substr(pos, end - pos));
}

}  // namespace hutch::api::opensandbox
