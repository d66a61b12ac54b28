// The disks of jail sandboxes: each sandbox's writable layer is an ext4
// file system in a sparse image file of its `disk_mb`, in its own
// directory (`<sandbox>/disk.img`), removed with it. Formatting one is a
// mkfs.ext4 run (tens of milliseconds, and a process spawned from hutchd,
// whose posix_spawn holds the I/O thread until the child has exec'd), so
// mkfs runs once per size: every further image is a sparse copy of that
// formatted "golden" image (copy_file_range of its few written extents:
// about a megabyte, no process). A few images of each size in recent use
// are made ahead, in the background, and a create takes one by rename.
//
// With `prepare` (hutchd as root), a pooled image is also attached to its
// loop device and its file system mounted ahead, as a detached mount
// (fsmount: in no mount namespace) holding the overlay's upper and work
// directories, which the sandbox's setup moves into its own mount
// namespace. So a create neither attaches (LOOP_CONFIGURE first writes
// the image's dirty pages back to the host's disk and waits for them) nor
// mounts. A device and mount stay while the pool holds their fds (the
// device auto-clears when the file system goes), so a crash leaves
// nothing attached or mounted, only files, which the next start removes.
// Copies, attaches and mounts run on the driver's BlockingWorker, never on
// the I/O thread.
//
// How many wait follows demand: `per_size` when quiet, up to kGrowth times
// that while takes of the size come faster (a burst drains the pool, and
// the next one finds a larger one). The size sandboxes get by default is
// warmed at start (Warm) with enough for a burst, so the first finds disks
// too, and
// concurrent takes of a size with no golden image yet wait for one mkfs
// instead of each running its own.
//
// One I/O thread: every call, and the refill, run on it.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "common/blocking_worker.h"
#include "common/ext4_image.h"
#include "common/result.h"

namespace asio = boost::asio;

namespace hutch::jail {

// Inodes of a sandbox disk of `disk_mb`: one per 8 KiB, at least 16384.
int64_t SandboxDiskInodes(int64_t disk_mb);

// A sandbox's writable layer ready to be moved into its mount namespace:
// the disk's loop device (auto-clear: it goes with the file system) and the
// file system as a detached mount (nosuid, nodev) holding `upper` (owned
// by the sandbox's root) and `work`. Closing `mount` before it was moved
// anywhere unmounts it.
struct WritableLayer {
  LoopDevice loop;
  UniqueFd mount;
};
// Attaches `image` (an empty sandbox disk) and mounts it so.
Result<WritableLayer> PrepareWritableLayer(const std::string& image, uint32_t root_uid);

// What the pool does to the images it hands out beyond making them.
struct DiskPrep {
  // Attach and mount each (PrepareWritableLayer; needs root), for a
  // sandbox whose root is host uid `root_uid`.
  bool prepare = false;
  uint32_t root_uid = 0;
};

class DiskPool {
 public:
  // `dir`: where pooled images wait (on the file system of the sandbox
  // dirs, so a take is a rename). `per_size`: images kept ready per size;
  // 0 makes every disk at its create. `worker` runs the copies and
  // preparations; it must outlive the pool.
  DiskPool(std::string dir, int per_size, BlockingWorker& worker, DiskPrep prep);
  ~DiskPool();
  DiskPool(const DiskPool&) = delete;
  DiskPool& operator=(const DiskPool&) = delete;

  // Creates the pool's directory, emptied of what an earlier run left.
  Status Reset();
  // Puts a fresh, empty image of `disk_mb` at `path` (must not exist) and
  // refills the pool behind it. With `prep.prepare`, the image comes as
  // the writable layer returned; without, that is empty.
  asio::awaitable<Result<WritableLayer>> Take(int64_t disk_mb, std::string path);
  // Keeps at least `count` (and per_size) images of `disk_mb` ready from
  // now on, before any take of it, whatever other sizes are used (the
  // sandboxes' default size, warmed at start).
  void Warm(asio::any_io_executor ex, int64_t disk_mb, int count);
  // Images ready now (tests, logs).
  size_t ready() const;
  // Images the pool aims to hold now, over the sizes kept warm.
  size_t wanted();
  // mkfs runs so far: one per size, however many takes wait for it (tests).
  int formats() const { return formats_; }

 private:
  struct Ready {
    std::string image;
    WritableLayer layer;  // empty without prep_.prepare
  };
  // A fresh image at `path`: a copy of the size's golden image (made
  // first when missing), or mkfs itself should copying fail; prepared
  // with prep_.prepare.
  asio::awaitable<Result<WritableLayer>> Make(int64_t disk_mb, std::string path);
  // The golden image of `disk_mb`, formatted now if missing ("" if that
  // failed: the caller formats in place).
  asio::awaitable<std::string> Golden(int64_t disk_mb);
  // A fresh sandbox disk of `disk_mb` at `path` by mkfs (counted).
  asio::awaitable<Status> Format(int64_t disk_mb, std::string path);
  void Refill(asio::any_io_executor ex, int64_t disk_mb);
  // Marks `disk_mb` the most recently used size kept warm, dropping the
  // oldest past kMaxSizes.
  void KeepWarm(int64_t disk_mb);
  // Images of `disk_mb` to keep ready now: per_size_, more after many
  // recent takes of it.
  int Target(int64_t disk_mb);
  // Whether a refill of `disk_mb` should make another image.
  bool Wanted(int64_t disk_mb);
  // A golden image being formatted: later callers wait for it (the timer
  // is cancelled when `image` is set; "" if it failed).
  struct GoldenMaking {
    explicit GoldenMaking(const asio::any_io_executor& ex)
        : done(ex, asio::steady_timer::time_point::max()) {}
    asio::steady_timer done;
    std::string image;
  };

  std::string dir_;
  int per_size_;
  BlockingWorker* worker_;
  DiskPrep prep_;
  std::map<int64_t, std::deque<Ready>> ready_;
  // Per size: refill loops running, and images they are making now.
  std::map<int64_t, int> refillers_;
  std::map<int64_t, int> making_;
  // When each recent take happened, and its size (demand; Target).
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_takes_;
  std::map<int64_t, std::shared_ptr<GoldenMaking>> golden_making_;
  // Sizes warmed on purpose (Warm): how many each keeps at least.
  std::map<int64_t, int> floors_;
  int formats_ = 0;
  // Sizes kept warm, most recently taken last; the oldest is dropped past
  // kMaxSizes.
  std::deque<int64_t> sizes_;
  uint64_t serial_ = 0;
  // Shared with the detached refills, so they notice a destroyed pool.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::map<int64_t, std::string> golden_;  // formatted once per size, never attached
};

}  // namespace hutch::jail
