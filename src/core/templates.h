// Templates: a name (or alias) resolved to a read-only root filesystem.
//
// `base` is assembled from the host's own packages by
// scripts/build-base-template (no download); `python` and
// `code-interpreter` are aliases of it until richer templates exist.
#pragma once

#include <map>
#include <string>

#include "common/result.h"

namespace hutch {

struct TemplateInfo {
  std::string name;
  std::string rootfs;
};

class TemplateRegistry {
 public:
  // `dir` holds one folder per template: <dir>/<name>/rootfs.
  TemplateRegistry(std::string dir, std::string builder_script, uint32_t uid_base)
      : dir_(std::move(dir)), builder_(std::move(builder_script)), uid_base_(uid_base) {}
  // Builds `base` if it is missing (first start on a machine: seconds).
  Status EnsureBase();
  Result<TemplateInfo> Resolve(const std::string& name) const;
  std::map<std::string, std::string> Aliases() const { return aliases_; }

 private:
  std::string dir_;
  std::string builder_;
  uint32_t uid_base_;
  std::map<std::string, std::string> aliases_ = {{"python", "base"}, {"code-interpreter", "base"}};
};

}  // namespace hutch
