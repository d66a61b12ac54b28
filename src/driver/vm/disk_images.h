// The vm driver's disks. A sandbox boots on two virtio disks:
//
//   vda  the template's root filesystem as a read-only ext4 image, built
//        once per template stack (owners shifted back from the jail's
//        mapped range to the guest's own ids) and shared by every sandbox
//        of it. A stack with layers (a built template, a file snapshot) is
//        flattened first: its overlay is mounted read-only on a private
//        temporary directory (MergedView) and the image built from that;
//   vdb  the sandbox's own writable ext4 disk of disk_mb: a qcow2 overlay
//        over one empty, formatted image per size, so a create writes a
//        few hundred KB, never a copy of anything.
//
// The guest stacks them as an overlay (hutch-vm-init). Images live in
// <vm dir>/images, root-owned and read-only for everyone.
// Runs on the I/O thread; long steps run as child processes (RunTool).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

namespace hutch::vm {

namespace asio = boost::asio;

class DiskImages {
 public:
  DiskImages(std::string images_dir, uint32_t uid_base)
      : dir_(std::move(images_dir)), uid_base_(uid_base) {}
  // The read-only ext4 image of the stack [layers..., rootfs] (layers
  // topmost first, may be empty); built on first use (seconds), then
  // reused. Keyed by every directory's path, inode and change time, so a
  // rebuilt template or another snapshot gets a new image.
  asio::awaitable<Result<std::string>> RootfsImage(const std::string& rootfs,
                                                   const std::vector<std::string>& layers);
  // Removes what a crashed build left in the images directory: merged-view
  // mounts and their directories, build copies, half-written images. Call
  // at start, before any build. Returns how many entries it removed.
  int RemoveLeftovers();
  // An empty ext4 image of `disk_mb` (sparse), the backing file of every
  // sandbox disk of that size.
  asio::awaitable<Result<std::string>> BlankDisk(int64_t disk_mb);
  // Creates `<dir>/disk.qcow2` over `<dir>/<backing name>` (relative, so it
  // resolves inside the sandbox directory QEMU is confined to); `format`
  // is the backing file's: raw (the blank disk) or qcow2 (a snapshot's or
  // a fork's disk).
  static asio::awaitable<Status> CreateOverlay(const std::string& dir,
                                               const std::string& backing_name,
                                               const std::string& format);

 private:
  // Serializes builds of one image: a second create waits for the first.
  // The turn lasts as long as the returned token.
  struct Turn {
    std::set<std::string>* building;
    std::string key;
    ~Turn() { building->erase(key); }
  };
  asio::awaitable<std::unique_ptr<Turn>> TakeTurn(const std::string& key);
  std::string dir_;
  uint32_t uid_base_;
  std::set<std::string> building_;
};

}  // namespace hutch::vm
