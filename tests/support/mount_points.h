// Mount points in the test's own mount namespace (hutchd's too: tests run
// it without a namespace of its own). Header-only, so unit tests that link
// no test support library can use it.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace hutch::testing {

// Mount points whose path starts with `prefix`, from /proc/self/mountinfo
// (fields: id, parent, device, root, mount point, …).
inline std::vector<std::string> MountPointsUnder(const std::string& prefix) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string id, parent, dev, root, point, rest;
  while (in >> id >> parent >> dev >> root >> point) {
    std::getline(in, rest);
    if (point.rfind(prefix, 0) == 0) out.push_back(point);
  }
  return out;
}

}  // namespace hutch::testing
