#include "driver/vm/disk_images.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <optional>

#include "common/sha256.h"
#include "common/subprocess.h"
#include "driver/vm/merged_view.h"

namespace hutch::vm {

namespace fs = std::filesystem;

namespace {

constexpr auto kBuildTimeout = std::chrono::minutes(10);

// nftw has no user pointer: one walk at a time on the I/O thread.
uint32_t g_shift_base = 0;
uint64_t g_tree_bytes = 0;
uint64_t g_tree_inodes = 0;

int ShiftOwner(const char* path, const struct stat* st, int, FTW*) {
  // The jail's template is owned by the mapped range (uid_base + id); the
  // guest kernel has no user namespace, so ids go back to what they are
  // inside. Ids outside the range are left as they are.
  const uid_t uid = st->st_uid >= g_shift_base ? st->st_uid - g_shift_base : st->st_uid;
  const gid_t gid = st->st_gid >= g_shift_base ? st->st_gid - g_shift_base : st->st_gid;
  if ((uid != st->st_uid || gid != st->st_gid) && lchown(path, uid, gid) != 0) return -1;
  // lchown clears set-id bits; the template has none (build-base-template).
  g_tree_bytes += static_cast<uint64_t>(st->st_blocks) * 512;
  ++g_tree_inodes;
  return 0;
}

// A tool that failed because the state dir's filesystem is full (its own
// message says so, or nothing is left there) is the host's disk, not a
// fault of hutchd: 507 storage_full, as the jail driver answers. Checked
// before the caller cleans up, which may free space again.
Error FullAware(const Error& e, const std::string& dir) {
  struct statvfs v {};
  const bool empty = statvfs(dir.c_str(), &v) == 0 && v.f_bavail == 0;
  if (!empty && e.message.find("No space left on device") == std::string::npos) return e;
  Error full = e;
  full.code = Code::kStorageFull;
  full.message = "state dir full: " + e.message;
  return full;
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return MakeError(Code::kInternal, "remove " + path + ": " + ec.message());
  return Status{};
}

}  // namespace

asio::awaitable<std::unique_ptr<DiskImages::Turn>> DiskImages::TakeTurn(const std::string& key) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (building_.count(key)) {
    t.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  building_.insert(key);
  co_return std::unique_ptr<Turn>(new Turn{&building_, key});
}

int DiskImages::RemoveLeftovers() {
  int removed = RemoveStaleMergedViews(dir_);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".build-", 0) == 0 ||
        (name.size() > 8 && name.compare(name.size() - 8, 8, ".img.tmp") == 0))
      stale.push_back(e.path());
  }
  for (const auto& p : stale) {
    if (RemoveTree(p.string()).ok()) ++removed;
  }
  return removed;
}

asio::awaitable<Result<std::string>> DiskImages::RootfsImage(
    const std::string& rootfs, const std::vector<std::string>& layers) {
  // The key of the whole stack; a stack without layers keeps the key it
  // had before layers were supported (its cached image stays valid).
  std::string stamp;
  std::vector<std::string> stack = layers;
  stack.push_back(rootfs);
  for (size_t i = 0; i < stack.size(); ++i) {
    struct stat st;
    const bool is_root = i + 1 == stack.size();
    if (stat(stack[i].c_str(), &st) != 0) {
      const std::string what = (is_root ? "template root " : "template layer ") + stack[i];
      co_return ErrnoError(what);
    }
    stamp += (is_root ? "" : "layer ") + stack[i] + "\n" + std::to_string(st.st_ino) + "\n" +
             std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) +
             (is_root ? "" : "\n");
  }
  const std::string key = Sha256Hex(stamp).substr(0, 16);
  const std::string img = dir_ + "/rootfs-" + key + ".img";
  auto turn = co_await TakeTurn(img);
  if (access(img.c_str(), F_OK) == 0) co_return img;

  // The tree to copy: the template's root itself, or the kernel's merge of
  // the stack (whiteouts applied) for as long as the copy runs.
  std::optional<MergedView> view;
  std::string source = rootfs;
  if (!layers.empty()) {
    const std::string mp = dir_ + "/" + kMergedViewPrefix + key;
    auto v = MergedView::Mount(mp, stack);
    if (!v.ok()) co_return v.error().Context("vm image of a layered template");
    view.emplace(std::move(v).value());
    source = view->path();
  }

  // A copy of the tree with the guest's owners (the template itself is in
  // use by jail sandboxes and must keep its owners).
  const std::string work = dir_ + "/.build-" + key;
  (void)RemoveTree(work);
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec) co_return MakeError(Code::kInternal, "create " + work + ": " + ec.message());
  std::vector<std::string> cp = {"/bin/cp", "-a", "--", source, work + "/tree"};
  if (auto r = co_await RunTool(cp, kBuildTimeout); !r.ok()) {
    Error e = FullAware(r.error(), dir_);
    (void)RemoveTree(work);
    co_return e.Context("copy template for its vm image");
  }
  view.reset();  // unmounted as soon as the copy is done
  g_shift_base = uid_base_;
  g_tree_bytes = 0;
  g_tree_inodes = 0;
  if (nftw((work + "/tree").c_str(), ShiftOwner, 64, FTW_PHYS) != 0) {
    Error e = ErrnoError("shift owners of the vm image tree");
    (void)RemoveTree(work);
    co_return e;
  }
  // Room for the files, ext4's metadata and an inode table for them; the
  // image is read-only, so no more.
  const uint64_t mb = (g_tree_bytes + g_tree_inodes * 256) * 5 / 4 / (1 << 20) + 32;
  const std::string tmp = img + ".tmp";
  // No journal: the guest mounts it read-only (noload).
  std::vector<std::string> mkfs = {"/sbin/mkfs.ext4",
                                   "-q",
                                   "-F",
                                   "-O",
                                   "^has_journal",
                                   "-L",
                                   "hutch-root",
                                   "-b",
                                   "4096",
                                   "-d",
                                   work + "/tree",
                                   tmp,
                                   std::to_string(mb) + "M"};
  auto r = co_await RunTool(mkfs, kBuildTimeout);
  if (!r.ok()) {
    Error e = FullAware(r.error(), dir_);
    (void)RemoveTree(work);
    unlink(tmp.c_str());
    co_return e.Context("mkfs.ext4 vm image");
  }
  (void)RemoveTree(work);
  if (chmod(tmp.c_str(), 0444) != 0 || rename(tmp.c_str(), img.c_str()) != 0)
    co_return ErrnoError("install " + img);
  co_return img;
}

asio::awaitable<Result<std::string>> DiskImages::BlankDisk(int64_t disk_mb) {
  const std::string img = dir_ + "/disk-" + std::to_string(disk_mb) + "M.img";
  auto turn = co_await TakeTurn(img);
  if (access(img.c_str(), F_OK) == 0) co_return img;
  const std::string tmp = img + ".tmp";
  // No journal: a sandbox's disk dies with the sandbox; lazy init keeps the
  // sparse image small.
  std::vector<std::string> mkfs = {"/sbin/mkfs.ext4",
                                   "-q",
                                   "-F",
                                   "-O",
                                   "^has_journal",
                                   "-L",
                                   "hutch-disk",
                                   "-E",
                                   "lazy_itable_init=1",
                                   tmp,
                                   std::to_string(disk_mb) + "M"};
  if (auto r = co_await RunTool(mkfs, kBuildTimeout); !r.ok()) {
    Error e = FullAware(r.error(), dir_);
    unlink(tmp.c_str());
    co_return e.Context("mkfs.ext4 sandbox disk");
  }
  if (chmod(tmp.c_str(), 0444) != 0 || rename(tmp.c_str(), img.c_str()) != 0)
    co_return ErrnoError("install " + img);
  co_return img;
}

asio::awaitable<Status> DiskImages::CreateOverlay(const std::string& dir,
                                                  const std::string& backing_name,
                                                  const std::string& format) {
  std::vector<std::string> argv = {
      "/usr/bin/qemu-img", "create",           "-q", "-f", "qcow2", "-F", format, "-b",
      backing_name,        dir + "/disk.qcow2"};
  auto r = co_await RunTool(argv, std::chrono::seconds(30));
  if (!r.ok()) co_return FullAware(r.error(), dir);
  co_return r;
}

}  // namespace hutch::vm
