// ScopedTree: a directory tree being made (a build, a pull) that is
// removed when its owner goes, unless the work finished and set `keep`
// (it was renamed into place). Every early return or exception cleans up.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace hutch {

struct ScopedTree {
  std::string dir;
  bool keep = false;
  ~ScopedTree() {
    if (keep || dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace hutch
