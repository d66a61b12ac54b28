#include "common/rooted_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace hutch {

using nlohmann::json;

namespace {

constexpr size_t kMaxListEntries = 100000;

// Opens `path` inside the tree at `root`. No fallback for kernels without
// openat2 (< 5.6): confinement must not silently disappear.
Result<UniqueFd> OpenAt(int root, const std::string& path, uint64_t flags, mode_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how));
  if (fd < 0) return FsError("open", path, errno);
  return UniqueFd(static_cast<int>(fd));
}

std::string BaseName(const std::string& path) {
  if (path == "/") return "/";
  return path.substr(path.rfind('/') + 1);
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The directory holding the last component of a normalized path.
struct Parent {
  UniqueFd dir;
  std::string name;
};

Result<Parent> OpenParent(int root, const std::string& path) {
  if (path == "/") return MakeError(Code::kInvalidRequest, "operation not allowed on /");
  auto dir = OpenAt(root, ParentOf(path), O_PATH | O_DIRECTORY);
  if (!dir.ok()) return dir.error();
  return Parent{std::move(*dir), BaseName(path)};
}

json MakeEntry(const std::string& path, const struct stat& st, int dirfd, const char* name) {
  const char* type = S_ISREG(st.st_mode)   ? "file"
                     : S_ISDIR(st.st_mode) ? "dir"
                     : S_ISLNK(st.st_mode) ? "symlink"
                                           : "other";
  json e = {{"name", BaseName(path)},
            {"path", path},
            {"type", type},
            {"size", static_cast<int64_t>(st.st_size)},
            {"mode", static_cast<int>(st.st_mode & 07777)},
            {"mtime", static_cast<int64_t>(st.st_mtim.tv_sec)},
            {"uid", static_cast<int64_t>(st.st_uid)},
            {"gid", static_cast<int64_t>(st.st_gid)}};
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf));
    if (n >= 0) e["symlink_target"] = std::string(buf, static_cast<size_t>(n));
  }
  return e;
}

Result<json> EntryAt(int dirfd, const std::string& name, const std::string& path) {
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0)
    return FsError("stat", path, errno);
  return MakeEntry(path, st, dirfd, name.c_str());
}

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

// Opens a subdirectory for reading without following a symlink in its place.
Result<DirPtr> OpenDirStream(int parent, const std::string& name, const std::string& path) {
  int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return FsError("open", path, errno);
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    close(fd);
    return FsError("opendir", path, err);
  }
  return DirPtr(d);
}

std::vector<std::string> ReadNames(DIR* d) {
  std::vector<std::string> names;
  while (dirent* de = readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  return names;
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

Status ListInto(DIR* d, const std::string& dir_path, int depth, std::vector<json>* out) {
  for (const std::string& name : ReadNames(d)) {
    const std::string path = Join(dir_path, name);
    struct stat st {};
    // Vanished since readdir: not an error of the listing.
    if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    if (out->size() >= kMaxListEntries) return MakeError(Code::kInvalidRequest, "too many entries");
    out->push_back(MakeEntry(path, st, dirfd(d), name.c_str()));
    if (S_ISDIR(st.st_mode) && depth > 1) {
      auto sub = OpenDirStream(dirfd(d), name, path);
      if (!sub.ok()) continue;  // unreadable subdirectory: list it, skip its content
      HUTCH_CHECK_OK(ListInto(sub->get(), path, depth - 1, out), "list");
    }
  }
  return {};
}

Status RemoveChildren(int parent, const std::string& name, const std::string& path) {
  auto d = OpenDirStream(parent, name, path);
  if (!d.ok()) return d.error();
  const int fd = dirfd(d->get());
  for (const std::string& child : ReadNames(d->get())) {
    const std::string child_path = Join(path, child);
    if (unlinkat(fd, child.c_str(), 0) == 0) continue;
    if (errno != EISDIR && errno != EPERM) return FsError("remove", child_path, errno);
    // unlink of a directory fails with EISDIR (EPERM on some filesystems).
    struct stat st {};
    if (fstatat(fd, child.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
      return FsError("remove", child_path, EPERM);
    HUTCH_CHECK_OK(RemoveChildren(fd, child, child_path), "remove");
    if (unlinkat(fd, child.c_str(), AT_REMOVEDIR) < 0) return FsError("remove", child_path, errno);
  }
  return {};
}

// mkdir -p; returns an O_PATH fd of the final directory. Each prefix is
// opened from the root again, so a symlink among them resolves inside the
// tree as a whole path would.
Result<UniqueFd> MakeDirsFd(int root, const std::string& path) {
  auto cur = OpenAt(root, "/", O_PATH | O_DIRECTORY);
  if (!cur.ok()) return cur.error();
  UniqueFd fd = std::move(*cur);
  std::string sofar;
  size_t pos = 1;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    std::string comp =
        path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? path.size() : slash + 1;
    sofar += "/" + comp;
    if (mkdirat(fd.get(), comp.c_str(), 0755) < 0 && errno != EEXIST)
      return FsError("mkdir", sofar, errno);
    auto next = OpenAt(root, sofar, O_PATH | O_DIRECTORY);
    if (!next.ok()) return FsError("mkdir", sofar, next.error().err);
    fd = std::move(*next);
  }
  return fd;
}

}  // namespace

FsIdentity::FsIdentity(uid_t uid, gid_t gid, Caps caps) {
  if (caps == kKeepCaps) {
    // Per thread, like the fs ids: other threads are not affected.
    int bits = prctl(PR_GET_SECUREBITS);
    if (bits >= 0 &&
        prctl(PR_SET_SECUREBITS, static_cast<unsigned long>(bits) | SECBIT_NO_SETUID_FIXUP) == 0)
      saved_securebits_ = bits;
  }
  // gid first: changing fsuid away from 0 drops the capabilities we would
  // still want for other changes.
  setfsgid(gid);
  setfsuid(uid);
}

FsIdentity::~FsIdentity() {
  setfsuid(0);
  setfsgid(0);
  if (saved_securebits_ >= 0)
    prctl(PR_SET_SECUREBITS, static_cast<unsigned long>(saved_securebits_));
}

Error FsError(const std::string& what, const std::string& path, int err) {
  return Error{CodeFromErrno(err), err, what + " " + path + ": " + std::strerror(err)};
}

Result<std::string> NormalizePath(const std::string& path, const std::string& home) {
  if (path.empty()) return MakeError(Code::kInvalidRequest, "empty path");
  if (path.find('\0') != std::string::npos)
    return MakeError(Code::kInvalidRequest, "path contains NUL");
  const std::string full = path[0] == '/' ? path : home + "/" + path;
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= full.size()) {
    size_t slash = full.find('/', pos);
    if (slash == std::string::npos) slash = full.size();
    std::string comp = full.substr(pos, slash - pos);
    pos = slash + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(std::move(comp));
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

Result<json> StatEntry(int root, const std::string& path) {
  if (path == "/") {
    auto top = OpenAt(root, "/", O_PATH | O_DIRECTORY);
    if (!top.ok()) return top.error();
    return EntryAt(top->get(), ".", "/");
  }
  auto p = OpenParent(root, path);
  if (!p.ok()) return p.error();
  return EntryAt(p->dir.get(), p->name, path);
}

Result<json> ListEntries(int root, const std::string& path, int depth) {
  auto fd = OpenAt(root, path, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return FsError("list", path, fd.error().err);
  DIR* raw = fdopendir(fd->get());
  if (raw == nullptr) return FsError("list", path, errno);
  fd->release();
  DirPtr d(raw);
  std::vector<json> entries;
  HUTCH_CHECK_OK(ListInto(d.get(), path, depth, &entries), "list " + path);
  std::sort(entries.begin(), entries.end(), [](const json& a, const json& b) {
    return a["path"].get_ref<const std::string&>() < b["path"].get_ref<const std::string&>();
  });
  return json(std::move(entries));
}

Result<json> MakeDirs(int root, const std::string& path) {
  auto fd = MakeDirsFd(root, path);
  if (!fd.ok()) {
    // The last component exists as something else: that is a conflict, not
    // a missing directory in the middle of the path.
    auto e = StatEntry(root, path);
    if (fd.error().err == ENOTDIR && e.ok() && (*e)["type"] != "dir")
      return Error{Code::kConflict, EEXIST, "mkdir " + path + ": exists and is not a directory"};
    return fd.error();
  }
  return StatEntry(root, path);
}

Status Remove(int root, const std::string& path, bool recursive) {
  auto p = OpenParent(root, path);
  if (!p.ok()) return p.error();
  struct stat st {};
  if (fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0)
    return FsError("remove", path, errno);
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(p->dir.get(), p->name.c_str(), 0) < 0) return FsError("remove", path, errno);
    return {};
  }
  if (recursive) HUTCH_CHECK_OK(RemoveChildren(p->dir.get(), p->name, path), "remove");
  if (unlinkat(p->dir.get(), p->name.c_str(), AT_REMOVEDIR) < 0)
    return FsError("remove", path, errno);
  return {};
}

Result<json> Move(int root, const std::string& from, const std::string& to) {
  auto src = OpenParent(root, from);
  if (!src.ok()) return src.error();
  if (to == "/") return MakeError(Code::kInvalidRequest, "operation not allowed on /");
  auto dst_dir = MakeDirsFd(root, ParentOf(to));
  if (!dst_dir.ok()) return dst_dir.error();
  const std::string to_name = BaseName(to);
  if (renameat(src->dir.get(), src->name.c_str(), dst_dir->get(), to_name.c_str()) < 0)
    return FsError("move " + from + " to", to, errno);
  return EntryAt(dst_dir->get(), to_name, to);
}

Result<json> SetAttributes(int root, const std::string& path, int mode, int64_t uid, int64_t gid) {
  if (mode > 07777) return MakeError(Code::kInvalidRequest, "mode must be at most 07777");
  auto fd = OpenAt(root, path, O_PATH);
  if (!fd.ok()) return fd.error();
  // chown first: it clears set-id bits that the chmod may then set.
  if (uid >= 0 || gid >= 0) {
    if (fchownat(fd->get(), "", uid < 0 ? static_cast<uid_t>(-1) : static_cast<uid_t>(uid),
                 gid < 0 ? static_cast<gid_t>(-1) : static_cast<gid_t>(gid), AT_EMPTY_PATH) < 0)
      return FsError("chown", path, errno);
  }
  if (mode >= 0) {
    // fchmod() refuses O_PATH descriptors; the descriptor's /proc link is
    // the inode already resolved inside the tree, with no second path walk.
    const std::string link = "/proc/self/fd/" + std::to_string(fd->get());
    if (chmod(link.c_str(), static_cast<mode_t>(mode)) < 0) return FsError("chmod", path, errno);
  }
  struct stat st {};
  if (fstat(fd->get(), &st) < 0) return FsError("stat", path, errno);
  return MakeEntry(path, st, fd->get(), "");
}

Result<ReadSource> OpenForRead(int root, const std::string& path, int64_t offset, int64_t length) {
  if (offset < 0) return MakeError(Code::kInvalidRequest, "negative offset");
  // O_NONBLOCK so that opening a FIFO cannot stall the caller.
  auto fd = OpenAt(root, path, O_RDONLY | O_NONBLOCK);
  if (!fd.ok()) return FsError("read", path, fd.error().err);
  struct stat st {};
  if (fstat(fd->get(), &st) < 0) return FsError("read", path, errno);
  if (S_ISDIR(st.st_mode)) return FsError("read", path, EISDIR);
  if (!S_ISREG(st.st_mode))
    return MakeError(Code::kInvalidRequest, "read " + path + ": not a regular file");
  ReadSource r;
  r.fd = std::move(*fd);
  r.size = static_cast<uint64_t>(st.st_size);
  r.offset = std::min<uint64_t>(static_cast<uint64_t>(offset), r.size);
  const uint64_t avail = r.size - r.offset;
  r.length = length < 0 ? avail : std::min<uint64_t>(static_cast<uint64_t>(length), avail);
  return r;
}

TempFile::TempFile(TempFile&& o) noexcept { *this = std::move(o); }

TempFile& TempFile::operator=(TempFile&& o) noexcept {
  if (this != &o) {
    Discard();
    dir_ = std::move(o.dir_);
    file_ = std::move(o.file_);
    tmp_name_ = std::exchange(o.tmp_name_, {});
    name_ = std::move(o.name_);
    path_ = std::move(o.path_);
    mode_ = o.mode_;
  }
  return *this;
}

TempFile::~TempFile() { Discard(); }

Result<TempFile> TempFile::Create(int root, const std::string& path, mode_t mode) {
  if (path == "/") return FsError("write", path, EISDIR);
  TempFile t;
  auto dir = MakeDirsFd(root, ParentOf(path));
  if (!dir.ok()) return dir.error();
  t.dir_ = std::move(*dir);
  t.name_ = BaseName(path);
  t.path_ = path;
  t.mode_ = mode & 07777;
  struct stat st {};
  if (fstatat(t.dir_.get(), t.name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return FsError("write", path, EISDIR);
  static uint64_t counter = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    // Hidden and unique; the name is capped to stay within NAME_MAX.
    std::string tmp = "." + t.name_.substr(0, 200) + ".hutch-" + std::to_string(getpid()) + "-" +
                      std::to_string(++counter);
    // 0600 until commit: a half-written file is not readable by others.
    int fd = openat(t.dir_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    0600);
    if (fd >= 0) {
      t.file_.reset(fd);
      t.tmp_name_ = std::move(tmp);
      return t;
    }
    if (errno != EEXIST) return FsError("write", path, errno);
  }
  return FsError("write", path, EEXIST);
}

Status TempFile::Append(const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(file_.get(), data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return FsError("write", path_, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

Result<json> TempFile::Commit() {
  if (fchmod(file_.get(), mode_) < 0) return FsError("chmod", path_, errno);
  if (close(file_.release()) < 0) return FsError("write", path_, errno);
  if (renameat(dir_.get(), tmp_name_.c_str(), dir_.get(), name_.c_str()) < 0)
    return FsError("rename", path_, errno);
  tmp_name_.clear();
  return EntryAt(dir_.get(), name_, path_);
}

void TempFile::Discard() {
  if (!tmp_name_.empty() && dir_.valid()) unlinkat(dir_.get(), tmp_name_.c_str(), 0);
  tmp_name_.clear();
  file_.reset();
}

}  // namespace hutch
