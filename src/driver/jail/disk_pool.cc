#include "driver/jail/disk_pool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>

#include "common/ext4_image.h"
#include "common/unique_fd.h"

namespace hutch::jail {

namespace fs = std::filesystem;

namespace {

// Sizes kept warm at once: a client cycling through many sizes gets
// images made at create instead of a pool of every size it ever used.
constexpr size_t kMaxSizes = 4;

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

asio::awaitable<Status> DiskPool::Make(int64_t disk_mb, const std::string& path) {
  // Without a pool (per_size 0) nothing is kept in its dir: mkfs each time.
  if (per_size_ <= 0) co_return co_await MakeDisk(disk_mb, path);
  auto g = golden_.find(disk_mb);
  if (g == golden_.end() || access(g->second.c_str(), R_OK) != 0) {
    const std::string golden = dir_ + "/golden-" + std::to_string(disk_mb) + "M.img";
    const std::string tmp = golden + ".tmp" + std::to_string(++serial_);
    auto st = co_await MakeDisk(disk_mb, tmp);
    if (!st.ok() || rename(tmp.c_str(), golden.c_str()) != 0) {
      unlink(tmp.c_str());
      co_return co_await MakeDisk(disk_mb, path);  // the pool dir is unusable: mkfs in place
    }
    // Bounded like the warm sizes: a client asking for many sizes leaves
    // at most this many golden images (a megabyte each) behind.
    while (golden_.size() >= 2 * kMaxSizes) {
      unlink(golden_.begin()->second.c_str());
      golden_.erase(golden_.begin());
    }
    golden_[disk_mb] = golden;
    g = golden_.find(disk_mb);
  }
  if (auto st = CopySparse(g->second, path); !st.ok()) {
    spdlog::warn("disk_pool copy_failed disk_mb={} err=\"{}\"", disk_mb, st.error().message);
    co_return co_await MakeDisk(disk_mb, path);
  }
  co_return Status{};
}

int64_t SandboxDiskInodes(int64_t disk_mb) { return std::max<int64_t>(16384, disk_mb * 128); }

DiskPool::DiskPool(std::string dir, int per_size) : dir_(std::move(dir)), per_size_(per_size) {}

DiskPool::~DiskPool() {
  for (const auto& [size, q] : ready_)
    for (const auto& img : q) unlink(img.c_str());
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

asio::awaitable<Status> DiskPool::Take(int64_t disk_mb, const std::string& path) {
  auto ex = co_await asio::this_coro::executor;
  if (per_size_ > 0) {
    sizes_.erase(std::remove(sizes_.begin(), sizes_.end(), disk_mb), sizes_.end());
    sizes_.push_back(disk_mb);
    if (sizes_.size() > kMaxSizes) {
      for (const auto& img : ready_[sizes_.front()]) unlink(img.c_str());
      ready_.erase(sizes_.front());
      sizes_.pop_front();
    }
  }
  std::string ready_image;
  if (auto it = ready_.find(disk_mb); it != ready_.end() && !it->second.empty()) {
    ready_image = it->second.front();
    it->second.pop_front();
  }
  Status st;
  if (!ready_image.empty() && rename(ready_image.c_str(), path.c_str()) == 0) {
    st = Status{};
  } else {
    if (!ready_image.empty()) unlink(ready_image.c_str());
    st = co_await Make(disk_mb, path);
  }
  if (per_size_ > 0) Refill(ex, disk_mb);
  co_return st;
}

void DiskPool::Refill(asio::any_io_executor ex, int64_t disk_mb) {
  if (refilling_.count(disk_mb)) return;
  refilling_.insert(disk_mb);
  std::weak_ptr<bool> alive = alive_;
  asio::co_spawn(
      ex,
      [this, alive, disk_mb]() -> asio::awaitable<void> {
        auto wanted = [&] {
          return std::find(sizes_.begin(), sizes_.end(), disk_mb) != sizes_.end() &&
                 static_cast<int>(ready_[disk_mb].size()) < per_size_;
        };
        while (!alive.expired() && wanted()) {
          const std::string img =
              dir_ + "/" + std::to_string(disk_mb) + "M-" + std::to_string(++serial_) + ".img";
          auto st = co_await Make(disk_mb, img);
          if (alive.expired()) {
            unlink(img.c_str());
            co_return;
          }
          if (!st.ok()) {
            spdlog::warn("disk_pool refill_failed disk_mb={} err=\"{}\"", disk_mb,
                         st.error().message);
            break;
          }
          // A size dropped meanwhile is not kept.
          if (std::find(sizes_.begin(), sizes_.end(), disk_mb) == sizes_.end()) {
            unlink(img.c_str());
            break;
          }
          ready_[disk_mb].push_back(img);
        }
        if (!alive.expired()) refilling_.erase(disk_mb);
      },
      asio::detached);
}

}  // namespace hutch::jail
