#include "driver/jail/disk_pool.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <filesystem>
#include <optional>

#include "common/clock.h"
#include "common/ext4_image.h"
#include "common/unique_fd.h"

namespace hutch::jail {

namespace fs = std::filesystem;

namespace {

// Sizes kept warm at once: a client cycling through many sizes gets
// images made at create instead of a pool of every size it ever used.
constexpr size_t kMaxSizes = 4;
// Demand: the takes of a size in the last kDemandWindow, kept ready (up
// to kGrowth times per_size) until they stop coming. A burst drains the
// pool whatever its size; the pool then grows so the next burst, or a
// steady stream of creates, is served from it. Once the takes stop, taken
// images are not replaced beyond per_size.
constexpr auto kDemandWindow = std::chrono::seconds(10);
constexpr int kGrowth = 8;
// Images of one size made at once by the refill: a pool drained by a
// burst comes back in a fraction of the time one maker takes (each make
// mostly waits in the kernel: the copy's writes, the loop attach).
constexpr int kRefillers = 2;

// No journal: the disk dies with its sandbox (a host crash ends the
// sandbox too), and a journal would write every metadata change twice.
asio::awaitable<Status> MakeDisk(int64_t disk_mb, const std::string& path) {
  Ext4ImageOptions opts;  // named: GCC 12 and braced temporaries in co_await
  opts.root_uid = 0;
  opts.inodes = SandboxDiskInodes(disk_mb);
  opts.journal = false;
  auto st = co_await CreateExt4Image(path, disk_mb, opts);
  if (!st.ok()) {
    // The host's disk, not hutchd, is at fault when it is full.
    struct statvfs v {};
    const std::string dir = fs::path(path).parent_path().string();
    if ((statvfs(dir.c_str(), &v) == 0 && v.f_bavail == 0) ||
        st.error().message.find("No space left on device") != std::string::npos) {
      Error e = st.error();
      e.code = Code::kStorageFull;
      co_return e.Context("state dir full: sandbox disk");
    }
    co_return st.error().Context("sandbox disk");
  }
  co_return Status{};
}

// Copies a sparse file's data extents only (SEEK_DATA/SEEK_HOLE), in the
// kernel (copy_file_range): a formatted 2 GiB image holds about 1 MiB.
Status CopySparse(const std::string& from, const std::string& to) {
  UniqueFd in(open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return ErrnoError("open " + from);
  struct stat st {};
  if (fstat(in.get(), &st) != 0) return ErrnoError("stat " + from);
  UniqueFd out(open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return ErrnoError("create " + to);
  auto fail = [&](const std::string& what) {
    Error e = ErrnoError(what + " " + to);
    unlink(to.c_str());
    return e;
  };
  if (ftruncate(out.get(), st.st_size) != 0) return fail("size");
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = lseek(in.get(), pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      return fail("seek data for");
    }
    off_t hole = lseek(in.get(), data, SEEK_HOLE);
    if (hole < 0) return fail("seek hole for");
    loff_t off_in = data, off_out = data;
    while (off_in < hole) {
      ssize_t n = copy_file_range(in.get(), &off_in, out.get(), &off_out,
                                  static_cast<size_t>(hole - off_in), 0);
      if (n <= 0) return fail("copy into");
    }
    pos = hole;
  }
  return Status{};
}

}  // namespace

asio::awaitable<Status> DiskPool::Format(int64_t disk_mb, std::string path) {
  ++formats_;
  co_return co_await MakeDisk(disk_mb, path);
}

asio::awaitable<std::string> DiskPool::Golden(int64_t disk_mb) {
  if (auto g = golden_.find(disk_mb); g != golden_.end() && access(g->second.c_str(), R_OK) == 0)
    co_return g->second;
  // Formatting it already (the takes of a burst on a new size): wait for
  // that one rather than run mkfs once per take.
  if (auto m = golden_making_.find(disk_mb); m != golden_making_.end()) {
    const std::shared_ptr<GoldenMaking> making = m->second;
    boost::system::error_code ec;  // operation_aborted: it is ready
    co_await making->done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return making->image;
  }
  auto making = std::make_shared<GoldenMaking>(co_await asio::this_coro::executor);
  golden_making_[disk_mb] = making;
  auto finish = [&](std::string image) {
    making->image = std::move(image);
    golden_making_.erase(disk_mb);
    making->done.cancel();
    return making->image;
  };
  const std::string golden = dir_ + "/golden-" + std::to_string(disk_mb) + "M.img";
  const std::string tmp = golden + ".tmp" + std::to_string(++serial_);
  auto st = co_await Format(disk_mb, tmp);
  if (!st.ok() || rename(tmp.c_str(), golden.c_str()) != 0) {
    unlink(tmp.c_str());
    co_return finish(std::string());  // the pool dir is unusable
  }
  // Bounded like the warm sizes: a client asking for many sizes leaves at
  // most this many golden images (a megabyte each) behind.
  while (golden_.size() >= 2 * kMaxSizes) {
    unlink(golden_.begin()->second.c_str());
    golden_.erase(golden_.begin());
  }
  golden_[disk_mb] = golden;
  co_return finish(golden);
}

asio::awaitable<Result<WritableLayer>> DiskPool::Make(int64_t disk_mb, std::string path) {
  // Without a pool (per_size 0) nothing is kept in its dir: mkfs each time.
  std::string golden;
  if (per_size_ > 0) golden = co_await Golden(disk_mb);
  bool made = false;
  if (!golden.empty()) {
    // (Named lambdas: GCC 12 mishandles temporaries in co_await.)
    auto copy = [golden, path] {
      const auto t = std::chrono::steady_clock::now();
      auto st = CopySparse(golden, path);
      spdlog::debug("disk_pool copied ms={:.2f}", MsSince(t));
      return st;
    };
    auto st = co_await worker_->Run(std::move(copy));
    if (st.ok()) made = true;
    else spdlog::warn("disk_pool copy_failed disk_mb={} err=\"{}\"", disk_mb, st.error().message);
  }
  if (!made) {
    if (auto st = co_await Format(disk_mb, path); !st.ok()) co_return st.error();
  }
  if (!prep_.prepare) co_return WritableLayer{};
  // Timed in the worker: how long the kernel took, apart from the wait
  // for a free worker thread (debug log).
  auto prepare = [path, uid = prep_.root_uid] {
    const auto t = std::chrono::steady_clock::now();
    auto l = PrepareWritableLayer(path, uid);
    spdlog::debug("disk_pool prepared ms={:.2f}", MsSince(t));
    return l;
  };
  auto layer = co_await worker_->Run(std::move(prepare));
  if (!layer.ok()) {
    unlink(path.c_str());
    co_return layer.error().Context("sandbox disk");
  }
  co_return std::move(layer).value();
}

Result<WritableLayer> PrepareWritableLayer(const std::string& image, uint32_t root_uid) {
  WritableLayer w;
  auto dev = AttachLoopDevice(image);
  if (!dev.ok()) return dev.error();
  w.loop = std::move(dev).value();
  UniqueFd fs(fsopen("ext4", FSOPEN_CLOEXEC));
  if (!fs) return ErrnoError("fsopen ext4");
  // noinit_itable: the image's inode tables were left unwritten (mkfs
  // lazy_itable_init) and stay so, instead of the kernel zeroing them in
  // the background and making the sparse image as large as its tables.
  // nobarrier: the disk dies with its sandbox, so its flushes (which the
  // loop device turns into an fsync of the image: a disk cache flush of
  // the host's at every sync and unmount) protect nothing.
  if (fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", w.loop.path.c_str(), 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_SET_FLAG, "noinit_itable", nullptr, 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_SET_FLAG, "nobarrier", nullptr, 0) != 0 ||
      fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return ErrnoError("mount " + image);
  w.mount.reset(fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
  if (!w.mount) return ErrnoError("fsmount " + image);
  // The overlay's upper layer (the merged root takes its owner: the
  // sandbox's root, not the host's) and its work directory.
  if (mkdirat(w.mount.get(), "upper", 0755) != 0 ||
      fchownat(w.mount.get(), "upper", root_uid, root_uid, AT_SYMLINK_NOFOLLOW) != 0 ||
      mkdirat(w.mount.get(), "work", 0700) != 0)
    return ErrnoError("upper dirs in " + image);
  return w;
}

int64_t SandboxDiskInodes(int64_t disk_mb) { return std::max<int64_t>(16384, disk_mb * 128); }

DiskPool::DiskPool(std::string dir, int per_size, BlockingWorker& worker, DiskPrep prep)
    : dir_(std::move(dir)), per_size_(per_size), worker_(&worker), prep_(prep) {}

DiskPool::~DiskPool() {
  // The file systems unmount and their loop devices detach as the fds
  // close (auto-clear).
  for (const auto& [size, q] : ready_)
    for (const auto& r : q) unlink(r.image.c_str());
  for (const auto& [size, img] : golden_) unlink(img.c_str());
}

Status DiskPool::Reset() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (ec) return MakeError(Code::kInternal, "empty " + dir_ + ": " + ec.message());
  fs::create_directories(dir_, ec);
  if (ec) return MakeError(Code::kInternal, "create " + dir_ + ": " + ec.message());
  return Status{};
}

size_t DiskPool::ready() const {
  size_t n = 0;
  for (const auto& [size, q] : ready_) n += q.size();
  return n;
}

size_t DiskPool::wanted() {
  if (per_size_ <= 0) return 0;
  size_t n = 0;
  for (int64_t mb : sizes_) n += static_cast<size_t>(Target(mb));
  return n;
}

void DiskPool::KeepWarm(int64_t disk_mb) {
  sizes_.erase(std::remove(sizes_.begin(), sizes_.end(), disk_mb), sizes_.end());
  sizes_.push_back(disk_mb);
  if (sizes_.size() > kMaxSizes) {
    // The oldest size that was not warmed on purpose (Warm) goes.
    auto old = std::find_if(sizes_.begin(), sizes_.end(),
                            [this](int64_t mb) { return !floors_.count(mb); });
    if (old == sizes_.end()) return;
    for (const auto& r : ready_[*old]) unlink(r.image.c_str());
    ready_.erase(*old);
    sizes_.erase(old);
  }
}

void DiskPool::Warm(asio::any_io_executor ex, int64_t disk_mb, int count) {
  if (per_size_ <= 0 || disk_mb <= 0) return;
  floors_[disk_mb] = std::max(count, per_size_);
  if (std::find(sizes_.begin(), sizes_.end(), disk_mb) == sizes_.end()) KeepWarm(disk_mb);
  Refill(std::move(ex), disk_mb);
}

int DiskPool::Target(int64_t disk_mb) {
  const auto now = std::chrono::steady_clock::now();
  while (!recent_takes_.empty() && now - recent_takes_.front().first > kDemandWindow)
    recent_takes_.pop_front();
  const auto demand = std::count_if(recent_takes_.begin(), recent_takes_.end(),
                                    [disk_mb](const auto& t) { return t.second == disk_mb; });
  const auto floor = floors_.find(disk_mb);
  return std::max(std::clamp(static_cast<int>(demand), per_size_, per_size_ * kGrowth),
                  floor == floors_.end() ? 0 : floor->second);
}

bool DiskPool::Wanted(int64_t disk_mb) {
  if (std::find(sizes_.begin(), sizes_.end(), disk_mb) == sizes_.end()) return false;
  const auto it = ready_.find(disk_mb);
  const int have =
      (it == ready_.end() ? 0 : static_cast<int>(it->second.size())) + making_[disk_mb];
  return have < Target(disk_mb);
}

asio::awaitable<Result<WritableLayer>> DiskPool::Take(int64_t disk_mb, std::string path) {
  auto ex = co_await asio::this_coro::executor;
  if (per_size_ > 0) {
    KeepWarm(disk_mb);
    recent_takes_.emplace_back(std::chrono::steady_clock::now(), disk_mb);
  }
  std::optional<Ready> ready;
  if (auto it = ready_.find(disk_mb); it != ready_.end() && !it->second.empty()) {
    ready = std::move(it->second.front());
    it->second.pop_front();
  }
  std::optional<Result<WritableLayer>> out;
  // The loop device follows its file through the rename.
  if (ready && rename(ready->image.c_str(), path.c_str()) == 0) {
    out.emplace(std::move(ready->layer));
  } else {
    if (ready) unlink(ready->image.c_str());
    ready.reset();
    const auto t0 = std::chrono::steady_clock::now();
    out.emplace(co_await Make(disk_mb, path));
    spdlog::debug("disk_pool made_at_take disk_mb={} ms={:.2f}", disk_mb, MsSince(t0));
  }
  if (per_size_ > 0) Refill(ex, disk_mb);
  co_return std::move(*out);
}

void DiskPool::Refill(asio::any_io_executor ex, int64_t disk_mb) {
  while (refillers_[disk_mb] < kRefillers && Wanted(disk_mb)) {
    ++refillers_[disk_mb];
    std::weak_ptr<bool> alive = alive_;
    asio::co_spawn(
        ex,
        [this, alive, disk_mb]() -> asio::awaitable<void> {
          while (!alive.expired() && Wanted(disk_mb)) {
            const std::string img =
                dir_ + "/" + std::to_string(disk_mb) + "M-" + std::to_string(++serial_) + ".img";
            ++making_[disk_mb];
            auto layer = co_await Make(disk_mb, img);
            if (alive.expired()) {
              unlink(img.c_str());
              co_return;
            }
            --making_[disk_mb];
            if (!layer.ok()) {
              spdlog::warn("disk_pool refill_failed disk_mb={} err=\"{}\"", disk_mb,
                           layer.error().message);
              break;
            }
            // A size dropped meanwhile is not kept.
            if (std::find(sizes_.begin(), sizes_.end(), disk_mb) == sizes_.end()) {
              unlink(img.c_str());
              break;
            }
            ready_[disk_mb].push_back(Ready{img, std::move(layer).value()});
          }
          if (!alive.expired()) --refillers_[disk_mb];
        },
        asio::detached);
  }
}

}  // namespace hutch::jail
