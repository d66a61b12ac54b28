#include "net/named_netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <thread>

namespace hutch::net {

Status PrepareNetnsDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError("create " + dir, ec.value());
  // Propagation can only be set on a mount point: when `dir` is not one
  // (EINVAL), bind it onto itself and try again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) == 0) return Status{};
    if (errno != EINVAL || attempt == 1) return ErrnoError("make " + dir + " a shared mount");
    if (mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) != 0)
      return ErrnoError("bind " + dir + " onto itself");
  }
  return Status{};
}

Result<UniqueFd> CreateNamedNetns(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  // The mount point: an empty file nobody can open for writing; O_EXCL
  // makes a name another server (or an earlier run) holds fail here.
  {
    UniqueFd f(open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!f) return ErrnoError("create " + path);
  }
  // unshare(2) moves only the calling thread into the new namespace: a
  // thread of its own does it, binds its namespace at `path` (the mount
  // namespace is the process's, so the mount is hutchd's) and keeps an fd
  // of it for the caller, then ends. hutchd's own threads stay in the
  // host's namespace.
  int ns = -1, err = 0;
  const char* step = "";
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      err = errno;
      step = "unshare(CLONE_NEWNET)";
      return;
    }
    if (mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      err = errno;
      step = "bind the namespace";
      return;
    }
    ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      err = errno;
      step = "open the namespace";
    }
  });
  t.join();
  if (ns < 0) {
    umount2(path.c_str(), MNT_DETACH);
    unlink(path.c_str());
    return ErrnoError("network namespace " + path + ": " + step, err);
  }
  return UniqueFd(ns);
}

Status RemoveNamedNetns(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  // MNT_DETACH: a process still in the namespace (or entering it) does not
  // keep the name; the namespace itself goes with its last user. EINVAL:
  // not mounted (a crash between create and bind), ENOENT: already gone.
  if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
    return ErrnoError("unmount " + path);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("remove " + path);
  return Status{};
}

}  // namespace hutch::net
