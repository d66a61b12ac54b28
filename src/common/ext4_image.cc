#include "common/ext4_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "common/subprocess.h"

namespace hutch {

asio::awaitable<Status> CreateExt4Image(const std::string& image, int64_t size_mb,
                                        const Ext4ImageOptions& opts) {
  {
    UniqueFd f(open(image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!f) co_return ErrnoError("create " + image);
    if (ftruncate(f.get(), size_mb * 1024 * 1024) != 0) {
      Error e = ErrnoError("size " + image);
      unlink(image.c_str());
      co_return e;
    }
  }
  // lazy_*_init and nodiscard: nothing is written beyond the metadata, so
  // an empty image costs under 1 MB of host disk whatever its size cap.
  // -m 0: no blocks reserved for a root that is the sandbox's anyway.
  std::string ext = "root_owner=" + std::to_string(opts.root_uid) + ":" +
                    std::to_string(opts.root_uid) +
                    ",lazy_itable_init=1,lazy_journal_init=1,nodiscard";
  std::vector<std::string> argv = {"/sbin/mkfs.ext4", "-q", "-F", "-m", "0", "-E", ext};
  if (opts.inodes > 0) argv.insert(argv.end(), {"-N", std::to_string(opts.inodes)});
  if (!opts.journal) argv.insert(argv.end(), {"-O", "^has_journal"});
  argv.push_back(image);
  auto st = co_await RunTool(argv, std::chrono::minutes(2));
  if (!st.ok()) {
    unlink(image.c_str());
    co_return st.error().Context("format ext4 image");
  }
  co_return Status{};
}

namespace {

// The loop device `image` is still attached to, if any. A volume is
// unmounted lazily (MNT_DETACH): its file system lives on, with the newest
// data in its caches, while any other mount namespace holds a copy of the
// mount — a process that unshared its mount namespace while the volume was
// mounted (`ip netns exec`, a service's PrivateTmp, a container) keeps it
// until it exits, and its loop device (auto-clear) stays attached as long.
// Mounting that same device again shares the live file system; a second
// loop device on the same file would be a second ext4 on one image, which
// reads stale blocks (data written before the restart looks lost) and
// overwrites the other's.
std::string AttachedLoop(const std::string& image) {
  struct stat img;
  if (stat(image.c_str(), &img) != 0) return "";
  DIR* d = opendir("/sys/block");
  if (!d) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "loop", 4) != 0) continue;
    const std::string dev = std::string("/dev/") + e->d_name;
    UniqueFd fd(open(dev.c_str(), O_RDONLY | O_CLOEXEC));
    loop_info64 info;
    if (!fd || ioctl(fd.get(), LOOP_GET_STATUS64, &info) != 0) continue;  // ENXIO: nothing attached
    if (info.lo_inode == img.st_ino && info.lo_device == img.st_dev) {
      found = dev;
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

Result<LoopDevice> AttachLoopDevice(const std::string& image) {
  UniqueFd img(open(image.c_str(), O_RDWR | O_CLOEXEC));
  if (!img) return ErrnoError("open " + image);
  UniqueFd ctl(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!ctl) return ErrnoError("open /dev/loop-control");
  // Another thread or process may take the free device between GET_FREE
  // and CONFIGURE (EBUSY): ask again. Each round one of the racers wins,
  // so the bound is the number of concurrent attaches (hutchd's kernel
  // worker threads and other processes), not a few tries: a burst of
  // creates with 32 threads attaching ran out of 32 tries.
  for (int attempt = 0; attempt < 1024; ++attempt) {
    int n = ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return ErrnoError("find a free loop device");
    LoopDevice dev;
    dev.path = "/dev/loop" + std::to_string(n);
    dev.fd.reset(open(dev.path.c_str(), O_RDWR | O_CLOEXEC));
    if (!dev.fd) return ErrnoError("open " + dev.path);
    loop_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.fd = static_cast<uint32_t>(img.get());
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(dev.fd.get(), LOOP_CONFIGURE, &cfg) != 0) {
      if (errno == EBUSY) continue;
      return ErrnoError("attach " + image + " to " + dev.path);
    }
    return dev;
  }
  return MakeError(Code::kUnavailable, "no free loop device for " + image);
}

Status MountExt4Image(const std::string& image, const std::string& dir) {
  if (const std::string live = AttachedLoop(image); !live.empty()) {
    if (mount(live.c_str(), dir.c_str(), "ext4", MS_NOSUID | MS_NODEV, "") != 0)
      return ErrnoError("mount " + image + " (still live on " + live + ") at " + dir);
    return Status{};
  }
  auto dev = AttachLoopDevice(image);
  if (!dev.ok()) return dev.error();
  // On failure, closing the device's fd detaches it (auto-clear); on
  // success the mount keeps it.
  if (mount(dev->path.c_str(), dir.c_str(), "ext4", MS_NOSUID | MS_NODEV, "") != 0)
    return ErrnoError("mount " + image + " at " + dir);
  return Status{};
}

Status UnmountLazily(const std::string& dir) {
  if (umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT)
    return ErrnoError("unmount " + dir);
  return Status{};
}

bool IsMountPoint(const std::string& dir) {
  struct statx sx;
  if (statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) != 0) return false;
  return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
         (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

std::vector<LoopBacking> LoopDevicesBackedUnder(const std::string& prefix) {
  std::vector<LoopBacking> out;
  DIR* d = opendir("/sys/block");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "loop", 4) != 0) continue;
    // Present only while a file is attached.
    std::ifstream in(std::string("/sys/block/") + e->d_name + "/loop/backing_file");
    std::string backing;
    if (std::getline(in, backing) && backing.rfind(prefix, 0) == 0)
      out.push_back({std::string("/dev/") + e->d_name, backing});
  }
  closedir(d);
  return out;
}

Status DetachLoopDevice(const std::string& dev) {
  UniqueFd fd(open(dev.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open " + dev);
  // ENXIO: already detached. A device in use is marked auto-clear instead.
  if (ioctl(fd.get(), LOOP_CLR_FD, 0) != 0 && errno != ENXIO) return ErrnoError("detach " + dev);
  return Status{};
}

Result<FsUsage> FsUsageOf(const std::string& dir) {
  struct statfs s;
  if (statfs(dir.c_str(), &s) != 0) return ErrnoError("statfs " + dir);
  FsUsage u;
  u.total_bytes = static_cast<uint64_t>(s.f_blocks) * s.f_bsize;
  u.used_bytes = static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_bsize;
  return u;
}

}  // namespace hutch
