#include "net/dns_pattern.h"

namespace hutch::net {

namespace {
constexpr size_t kMaxName = 253;
constexpr size_t kMaxLabel = 63;

bool HostByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}
}  // namespace

std::optional<std::string> NormalizeDomainName(std::string_view name) {
  if (name == ".") return std::string();
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > kMaxName) return std::nullopt;
  std::string out;
  out.reserve(name.size());
  size_t label = 0;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '.') {
      if (label == 0) return std::nullopt;
      label = 0;
    } else {
      if (!HostByte(c) || ++label > kMaxLabel) return std::nullopt;
    }
    out.push_back(c);
  }
  if (label == 0) return std::nullopt;
  return out;
}

Result<std::string> NormalizeDomainPattern(std::string_view pattern) {
  bool wildcard = pattern.size() >= 2 && pattern.substr(0, 2) == "*.";
  auto base = NormalizeDomainName(wildcard ? pattern.substr(2) : pattern);
  if (!base || base->empty()) {
    return MakeError(Code::kInvalidRequest,
                     "bad domain pattern '" + std::string(pattern) +
                         "': want a host name (letters, digits, '-', '_') or '*.' followed by one");
  }
  return wildcard ? "*." + *base : *base;
}

bool DomainPatternMatches(std::string_view pattern, std::string_view name) {
  if (pattern.size() >= 2 && pattern.substr(0, 2) == "*.") {
    std::string_view suffix = pattern.substr(1);  // ".example.com"
    return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  }
  return pattern == name;
}

}  // namespace hutch::net
