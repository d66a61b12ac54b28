#include "api/opensandbox/session_protocol.h"

#include <cstdio>
#include <random>

namespace hutch::api::opensandbox {

std::string NewSentinel() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[48];
  snprintf(buf, sizeof(buf), "__HUTCH_SESSION_%016llx__",
           static_cast<unsigned long long>(dist(rd)));
  return buf;
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string SessionScript(const std::string& command, const std::string& cwd,
                          const std::string& sentinel) {
  std::string s = "{ ";
  if (!cwd.empty()) s += "cd -- " + ShellQuote(cwd) + " && ";
  s += command;
  s += "\n} </dev/null; printf '\\n%s:%d\\n' " + ShellQuote(sentinel) +
       " \"$?\"; printf '\\n%s\\n' " + ShellQuote(sentinel) + " >&2\n";
  return s;
}

std::vector<std::string> SentinelLines::Feed(std::string_view data) {
  std::vector<std::string> out;
  if (done_) return out;
  for (auto& piece : lines_.FeedPieces(data)) {
    std::string& line = piece.text;
    // Only a whole line's start can be the sentinel, not a long line's rest.
    if (piece.line_start && line.rfind(sentinel_, 0) == 0) {
      const std::string rest = line.substr(sentinel_.size());
      if (rest.empty() || rest[0] == ':') {
        if (rest.size() > 1) status_ = std::atoi(rest.c_str() + 1);
        held_empty_ = false;
        done_ = true;
        return out;
      }
    }
    if (held_empty_) out.emplace_back();
    held_empty_ = line.empty();
    if (!held_empty_) out.push_back(std::move(line));
  }
  return out;
}

}  // namespace hutch::api::opensandbox
