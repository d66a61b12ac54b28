#include "driver/vm/merged_view.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The mount points of this mount namespace, as paths.
std::vector<std::string> MountPoints() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (f >> id >> parent >> dev >> root >> point) out.push_back(Unescape(point));
  }
  return out;
}

}  // namespace

Result<MergedView> MergedView::Mount(const std::string& mountpoint,
                                     const std::vector<std::string>& lowers) {
  if (lowers.size() < 2)
    return MakeError(Code::kInternal, "a merged view needs at least two layers");
  std::string opts = "lowerdir=";
  for (size_t i = 0; i < lowers.size(); ++i) {
    // overlayfs splits lowerdir on ':' and its options on ','; hutch's own
    // paths never carry them, anything else is refused rather than escaped.
    if (lowers[i].find_first_of(":,\\") != std::string::npos)
      return MakeError(Code::kInternal,
                       "layer path " + lowers[i] + " has a character overlayfs cannot take");
    opts += (i ? ":" : "") + lowers[i];
  }
  if (mkdir(mountpoint.c_str(), 0700) != 0) return ErrnoError("create merged view " + mountpoint);
  if (mount("overlay", mountpoint.c_str(), "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
            opts.c_str()) != 0) {
    Error e = ErrnoError("mount the template stack's overlay on " + mountpoint);
    rmdir(mountpoint.c_str());
    return e;
  }
  return MergedView(mountpoint);
}

MergedView::~MergedView() {
  if (path_.empty()) return;
  // Detach: a reader still inside (there is none once the copy ended)
  // cannot keep the view alive in the tree.
  if (umount2(path_.c_str(), MNT_DETACH) != 0) {
    spdlog::error("vm merged_view umount {} failed: {}", path_, strerror(errno));
    return;  // never remove a directory that may still show the layers
  }
  if (rmdir(path_.c_str()) != 0)
    spdlog::error("vm merged_view rmdir {} failed: {}", path_, strerror(errno));
}

int RemoveStaleMergedViews(const std::string& dir) {
  const std::string prefix = dir + "/" + kMergedViewPrefix;
  int removed = 0;
  // Deepest first, so a mount stacked over another comes off first.
  auto points = MountPoints();
  std::sort(points.rbegin(), points.rend());
  for (const auto& p : points) {
    if (p.rfind(prefix, 0) != 0) continue;
    if (umount2(p.c_str(), MNT_DETACH) != 0)
      spdlog::error("vm merged_view stale umount {}: {}", p, strerror(errno));
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kMergedViewPrefix, 0) != 0) continue;
    // rmdir only: if the unmount above failed the directory is not empty
    // and stays, rather than a recursive delete walking into the layers.
    if (rmdir(e.path().c_str()) == 0) {
      ++removed;
      spdlog::info("vm merged_view removed_stale {}", e.path().string());
    } else {
      spdlog::error("vm merged_view stale rmdir {}: {}", e.path().string(), strerror(errno));
    }
  }
  return removed;
}

}  // namespace hutch::vm
