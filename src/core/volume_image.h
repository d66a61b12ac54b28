// The host side of a volume: its ext4 image file and the loop mount that
// makes it a directory on the host. Owned by VolumeManager.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace asio = boost::asio;

namespace hutch {

// Creates `image` (must not exist) as a sparse file of `size_mb` holding an
// empty ext4 filesystem whose root directory belongs to `uid` (the host uid
// a sandbox's root maps to). Nothing is preallocated: the file grows as
// data is written, up to `size_mb`.
asio::awaitable<Status> CreateVolumeImage(const std::string& image, int64_t size_mb, uint32_t uid);

// Attaches `image` to a free loop device (auto-clearing: it is released
// when the last mount of it goes) and mounts it at `dir` (nosuid, nodev).
// An image still live on a loop device (a lazily unmounted volume that
// another mount namespace keeps) is mounted from that device instead: the
// same file system, never a second one on the same file.
Status MountVolumeImage(const std::string& image, const std::string& dir);

// Lazily unmounts `dir`: sandboxes that still have the volume bound keep
// using it; the loop device goes when they are gone too.
Status UnmountVolume(const std::string& dir);

// Whether `dir` is the root of a mount (e.g. a volume a crashed hutchd left
// mounted).
bool IsMountPoint(const std::string& dir);

// Bytes in use and total of the filesystem mounted at `dir`.
struct VolumeUsage {
  uint64_t used_bytes = 0, total_bytes = 0;
};
Result<VolumeUsage> VolumeUsageOf(const std::string& dir);

}  // namespace hutch
