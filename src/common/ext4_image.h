// ext4 file systems in sparse image files, and the loop devices that make
// them mountable: a volume's data (core/volume_manager, mounted on the
// host) and a jail sandbox's writable layer (driver/jail, mounted inside
// the sandbox's own mount namespace).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace asio = boost::asio;

namespace hutch {

struct Ext4ImageOptions {
  // Host uid (and gid) owning the file system's root directory.
  uint32_t root_uid = 0;
  // Number of inodes; 0: mkfs's default for the size.
  int64_t inodes = 0;
  // A journal only matters for data that must survive a host crash (a
  // volume); a sandbox's writable layer dies with the sandbox.
  bool journal = true;
};

// Creates `image` (must not exist) as a sparse file of `size_mb` holding an
// empty ext4 filesystem. Nothing is preallocated: the file grows as data is
// written, up to `size_mb`.
asio::awaitable<Status> CreateExt4Image(const std::string& image, int64_t size_mb,
                                        const Ext4ImageOptions& opts);

// A loop device attached to an image file, auto-clearing: the kernel
// detaches it when its last user goes — this fd, and every mount of it.
// So: mount it (anywhere, in any mount namespace), then drop this; the
// device lives exactly as long as the mounts.
struct LoopDevice {
  UniqueFd fd;
  std::string path;  // /dev/loopN
};
Result<LoopDevice> AttachLoopDevice(const std::string& image);

// Attaches `image` to a free loop device and mounts it at `dir` (nosuid,
// nodev) in hutchd's mount namespace. An image still live on a loop device
// (a lazily unmounted volume that another mount namespace keeps) is
// mounted from that device instead: the same file system, never a second
// one on the same file.
Status MountExt4Image(const std::string& image, const std::string& dir);

// Lazily unmounts `dir`: mount namespaces that still hold a copy keep
// using it; the loop device goes when they are gone too.
Status UnmountLazily(const std::string& dir);

// Whether `dir` is the root of a mount (e.g. a volume a crashed hutchd left
// mounted).
bool IsMountPoint(const std::string& dir);

// Loop devices whose backing file's path starts with `prefix` (an
// absolute path without symlinks, as the kernel prints it; a deleted
// file's path ends in " (deleted)").
struct LoopBacking {
  std::string device;        // /dev/loopN
  std::string backing_file;  // as /sys/block/loopN/loop/backing_file says
};
std::vector<LoopBacking> LoopDevicesBackedUnder(const std::string& prefix);

// Detaches a loop device; one still mounted somewhere is marked to detach
// when its last mount goes (the kernel's auto-clear).
Status DetachLoopDevice(const std::string& dev);

// Bytes in use and total of the filesystem mounted at `dir`.
struct FsUsage {
  uint64_t used_bytes = 0, total_bytes = 0;
};
Result<FsUsage> FsUsageOf(const std::string& dir);

}  // namespace hutch
