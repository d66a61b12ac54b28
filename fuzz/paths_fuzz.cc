// Path checks on untrusted strings: NormalizePath (every file API), volume
// names and mount paths, and volume records read back from the store.
// Invariants: a normalized path is absolute with no empty, "." or ".."
// component; an accepted mount path is normalized and outside
// /proc, /dev, /sys; an accepted name is a plain directory name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/rooted_fs.h"
#include "core/volume.h"

namespace {
bool Normal(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  if (p == "/") return true;
  if (p.back() == '/') return false;
  return p.find("//") == std::string::npos && p.find("/./") == std::string::npos &&
         p.find("/../") == std::string::npos && p.substr(p.size() - 2) != "/." &&
         (p.size() < 3 || p.substr(p.size() - 3) != "/..");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  auto n = hutch::NormalizePath(s, "/home/user");
  if (n.ok() && !Normal(*n)) abort();
  if (hutch::CheckVolumeMountPath(s).ok()) {
    if (!Normal(s) || s == "/" || (s.rfind("/proc", 0) == 0 && (s.size() == 5 || s[5] == '/')))
      abort();
  }
  if (hutch::CheckVolumeName(s).ok()) {
    if (s.find('/') != std::string::npos || s == "." || s == ".." || s.size() > 63) abort();
  }
  hutch::VolumeRecord r;
  (void)hutch::VolumeRecord::FromStoreJson(s, &r);
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (!j.is_discarded()) {
    auto mounts = hutch::VolumeMountsFromJson(j);
    (void)hutch::CheckVolumeMounts(mounts);
  }
  return 0;
}
