#include "api/e2b/e2b_auth.h"

#include "api/e2b/proto_json.h"

namespace hutch::api::e2b {

std::vector<std::string> KeyCandidates(std::string_view presented) {
  std::vector<std::string> out;
  if (presented.empty()) return out;
  out.emplace_back(presented);
  const std::string_view prefix = "e2b_";
  if (presented.size() > prefix.size() && presented.substr(0, prefix.size()) == prefix) {
    std::string rest(presented.substr(prefix.size()));
    out.push_back(rest);
    out.push_back("hk_" + rest);
  }
  return out;
}

std::string BasicAuthUser(std::string_view auth) {
  const std::string_view prefix = "Basic ";
  if (auth.size() <= prefix.size()) return {};
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(auth[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return {};
  Json m = {{"b", std::string(auth.substr(prefix.size()))}};
  auto raw = PjBytes(m, "b");
  if (!raw.ok()) return {};
  std::string s = *raw;
  size_t colon = s.find(':');
  if (colon != std::string::npos) s.resize(colon);
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return {};
  return s;
}

}  // namespace hutch::api::e2b
