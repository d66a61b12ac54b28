// The disks of jail sandboxes: each sandbox's writable layer is an ext4
// file system in a sparse image file of its `disk_mb`, in its own
// directory (`<sandbox>/disk.img`), removed with it. Formatting one is a
// mkfs.ext4 run (tens of milliseconds, and a process spawned from hutchd,
// whose posix_spawn holds the I/O thread until the child has exec'd), so
// mkfs runs once per size: every further image is a sparse copy of that
// formatted "golden" image (copy_file_range of its few written extents:
// about a megabyte, no process). A few images of each size in recent use
// are made ahead, in the background, and a create takes one by rename. The images in the pool are
// plain files (never attached or mounted), so a crash leaves nothing but files, which the next
// start removes.
//
// One I/O thread: every call, and the refill, run on it.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/result.h"

namespace asio = boost::asio;

namespace hutch::jail {

// Inodes of a sandbox disk of `disk_mb`: one per 8 KiB, at least 16384.
int64_t SandboxDiskInodes(int64_t disk_mb);

class DiskPool {
 public:
  // `dir`: where pooled images wait (on the file system of the sandbox
  // dirs, so a take is a rename). `per_size`: images kept ready per size;
  // 0 makes every disk at its create.
  DiskPool(std::string dir, int per_size);
  ~DiskPool();
  DiskPool(const DiskPool&) = delete;
  DiskPool& operator=(const DiskPool&) = delete;

  // Creates the pool's directory, emptied of what an earlier run left.
  Status Reset();
  // Puts a fresh, empty image of `disk_mb` at `path` (must not exist) and
  // refills the pool behind it.
  asio::awaitable<Status> Take(int64_t disk_mb, const std::string& path);
  // Images ready now (tests, logs).
  size_t ready() const;

 private:
  // A fresh image at `path`: a copy of the size's golden image (made
  // first when missing), or mkfs itself should copying fail.
  asio::awaitable<Status> Make(int64_t disk_mb, const std::string& path);
  void Refill(asio::any_io_executor ex, int64_t disk_mb);

  std::string dir_;
  int per_size_;
  std::map<int64_t, std::deque<std::string>> ready_;
  std::set<int64_t> refilling_;
  // Sizes kept warm, most recently taken last; the oldest is dropped past
  // kMaxSizes.
  std::deque<int64_t> sizes_;
  uint64_t serial_ = 0;
  // Shared with the detached refills, so they notice a destroyed pool.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::map<int64_t, std::string> golden_;  // formatted once per size, never attached
};

}  // namespace hutch::jail
