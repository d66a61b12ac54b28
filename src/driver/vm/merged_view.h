// A read-only overlayfs view of a template stack ([layers..., rootfs],
// topmost first), mounted on a private temporary directory so the vm
// driver can build one disk image from it: whiteouts and opaque
// directories of the layers are resolved by the kernel, exactly as a jail
// sandbox sees the stack.
//
// RAII: the destructor unmounts and removes the mount point on every
// path. A hutchd that dies mid-build leaves a mount behind; at start,
// RemoveStaleMergedViews finds such mounts by their directory's prefix in
// /proc/self/mountinfo and removes them (unmount first, then rmdir only:
// never a recursive delete, which would reach into the layers).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace hutch::vm {

// The prefix of merged-view mount points inside the images directory.
inline constexpr const char* kMergedViewPrefix = ".merge-";

class MergedView {
 public:
  // Creates `mountpoint` (mode 0700; it must not exist) and mounts the
  // stack there read-only, nosuid, nodev. `lowers` topmost first, at
  // least two.
  static Result<MergedView> Mount(const std::string& mountpoint,
                                  const std::vector<std::string>& lowers);
  MergedView(MergedView&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  MergedView& operator=(MergedView&&) = delete;
  MergedView(const MergedView&) = delete;
  ~MergedView();
  const std::string& path() const { return path_; }

 private:
  explicit MergedView(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Unmounts every mount under `dir`/.merge-* and removes those directories
// (a crashed build's). Returns how many it removed.
int RemoveStaleMergedViews(const std::string& dir);

}  // namespace hutch::vm
