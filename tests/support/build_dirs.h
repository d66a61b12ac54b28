// What a test server's template build dir holds: the temp dirs a build or
// an image pull works in (<state>/builds/.tmp-*), which nothing may leave
// behind once it has finished or failed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_server.h"

namespace hutch::testing {

inline std::vector<std::string> TempBuildDirs(const TestServer& s) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(s.state_dir() + "/state/builds", ec))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) out.push_back(e.path().string());
  return out;
}

}  // namespace hutch::testing
