#include "api/opensandbox/env_file.h"

#include <cctype>

#include "api/opensandbox/osb_api.h"
#include "core/file_ops.h"

namespace hutch::api::opensandbox {

namespace {

// The file is small: a few variables an agent set.
constexpr int64_t kMaxEnvFileBytes = 1 << 20;

bool NameChar(char c, bool first) {
  return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

}  // namespace

std::map<std::string, std::string> ParseEnvFile(std::string_view t) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  auto skip_line = [&] {
    const size_t nl = t.find('\n', i);
    i = nl == std::string_view::npos ? t.size() : nl + 1;
  };
  while (i < t.size()) {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n')) ++i;
    if (i >= t.size()) break;
    if (t[i] == '#') {
      skip_line();
      continue;
    }
    if (t.substr(i, 7) == "export ") i += 7;
    const size_t name_at = i;
    while (i < t.size() && NameChar(t[i], i == name_at)) ++i;
    if (i == name_at || i >= t.size() || t[i] != '=') {
      skip_line();
      continue;
    }
    std::string name(t.substr(name_at, i - name_at));
    ++i;  // '='
    std::string value;
    if (i < t.size() && t[i] == '\'') {
      const size_t close = t.find('\'', i + 1);
      const size_t end = close == std::string_view::npos ? t.size() : close;
      value = std::string(t.substr(i + 1, end - i - 1));
      i = end;
      skip_line();
    } else if (i < t.size() && t[i] == '"') {
      for (++i; i < t.size() && t[i] != '"'; ++i) {
        if (t[i] != '\\' || i + 1 >= t.size()) {
          value += t[i];
          continue;
        }
        const char c = t[++i];
        switch (c) {
          case 'n':
            value += '\n';
            break;
          case 'r':
            value += '\r';
            break;
          case 't':
            value += '\t';
            break;
          case '\\':
          case '"':
          case '$':
            value += c;
            break;
          default:
            value += '\\', value += c;
        }
      }
      skip_line();
    } else {
      const size_t nl = t.find('\n', i);
      const size_t end = nl == std::string_view::npos ? t.size() : nl;
      value = std::string(t.substr(i, end - i));
      while (!value.empty() &&
             (value.back() == '\r' || value.back() == ' ' || value.back() == '\t'))
        value.pop_back();
      i = end;
    }
    out[std::move(name)] = std::move(value);
  }
  return out;
}

boost::asio::awaitable<Result<std::map<std::string, std::string>>> ExecdEnv(
    std::shared_ptr<Sandbox> sb) {
  std::map<std::string, std::string> env;
  auto text = co_await ReadWholeFile(sb, kExecdEnvFile, kDefaultUser, kMaxEnvFileBytes);
  if (text.ok()) env = ParseEnvFile(*text);
  else if (text.error().code != Code::kFileNotFound)
    co_return text.error().Context(std::string("the env file ") + kExecdEnvFile);
  env["EXECD_ENVS"] = kExecdEnvFile;
  co_return env;
}

}  // namespace hutch::api::opensandbox
