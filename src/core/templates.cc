#include "core/templates.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace hutch {

Status TemplateRegistry::EnsureBase() {
  std::string marker = dir_ + "/base/template.json";
  struct stat st;
  if (stat(marker.c_str(), &st) == 0) return {};
  spdlog::info("template=base building dir={} (first start; takes a few seconds)", dir_);
  pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork template builder");
  if (pid == 0) {
    std::string dest = dir_ + "/base";
    std::string base = std::to_string(uid_base_);
    execl("/bin/bash", "bash", builder_.c_str(), dest.c_str(), base.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return MakeError(Code::kInternal, "template builder " + builder_ + " failed (status " +
                                          std::to_string(status) + ")");
  if (stat(marker.c_str(), &st) != 0) return MakeError(Code::kInternal, "template builder left no " + marker);
  return {};
}

Result<TemplateInfo> TemplateRegistry::Resolve(const std::string& name) const {
  std::string real = name;
  if (auto it = aliases_.find(name); it != aliases_.end()) real = it->second;
  if (real.empty() || real.find('/') != std::string::npos || real[0] == '.')
    return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  std::string rootfs = dir_ + "/" + real + "/rootfs";
  std::string marker = dir_ + "/" + real + "/template.json";
  struct stat st;
  if (stat(marker.c_str(), &st) != 0) return MakeError(Code::kTemplateNotFound, "template '" + name + "' not found");
  return TemplateInfo{real, rootfs};
}

}  // namespace hutch
