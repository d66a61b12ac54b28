// Synchronous file operations confined to a directory tree: the agent's
// kFsRequest (docs/wire.md "Files") inside a sandbox, whose root is "/",
// and hutchd's volume file API on the host, whose root is the volume.
//
// Every path is normalized and absolute relative to `root` (an fd of the
// tree's top directory) and resolved through openat2 with RESOLVE_IN_ROOT
// and RESOLVE_NO_MAGICLINKS: `..` and absolute symlinks stay inside the
// tree and /proc/<pid>/root-style links cannot be used to escape; the final
// component is then handled with *at() calls on its parent directory.
// Callers wrap operations in an FsIdentity so the kernel checks permissions
// as the requesting user and new files get that user's ownership.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch {

// Takes the fs uid/gid of a user for its lifetime; restores root after.
//
// kKeepCaps keeps the thread's capabilities (SECBIT_NO_SETUID_FIXUP) while
// the fs ids change: new files still get the given owner, but permission
// checks pass as for a root. hutchd uses it on a volume, acting as the
// sandboxes' root does there (which may read and change any file on it).
class FsIdentity {
 public:
  enum Caps { kDropCaps, kKeepCaps };
  FsIdentity(uid_t uid, gid_t gid, Caps caps = kDropCaps);
  ~FsIdentity();
  FsIdentity(const FsIdentity&) = delete;
  FsIdentity& operator=(const FsIdentity&) = delete;

 private:
  int saved_securebits_ = -1;  // restored on destruction when >= 0
};

// Error for a failed syscall on `path`, with the API code derived from errno.
Error FsError(const std::string& what, const std::string& path, int err);

// Makes `path` absolute (relative to `home`) and lexically normal ("." and
// ".." removed, no trailing slash). Rejects NUL bytes and empty paths.
Result<std::string> NormalizePath(const std::string& path, const std::string& home);

Result<nlohmann::json> StatEntry(int root, const std::string& path);
Result<nlohmann::json> ListEntries(int root, const std::string& path, int depth);
Result<nlohmann::json> MakeDirs(int root, const std::string& path);  // entry of the dir
Status Remove(int root, const std::string& path, bool recursive);
Result<nlohmann::json> Move(int root, const std::string& from,
                            const std::string& to);  // entry of `to`
// chown (uid/gid; -1 keeps it) then chmod (mode 0..07777; -1 keeps it) of
// what `path` names, a final symlink followed inside the tree; its entry.
Result<nlohmann::json> SetAttributes(int root, const std::string& path, int mode, int64_t uid,
                                     int64_t gid);

// A regular file opened for a ranged read.
struct ReadSource {
  UniqueFd fd;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes to send, already clamped to the file
};
// length < 0 means to the end.
Result<ReadSource> OpenForRead(int root, const std::string& path, int64_t offset, int64_t length);

// A temp file beside the target of a write. Unlinked on destruction unless
// committed, so an aborted upload never leaves debris.
class TempFile {
 public:
  TempFile() = default;
  TempFile(TempFile&& o) noexcept;
  TempFile& operator=(TempFile&& o) noexcept;
  ~TempFile();

  // Creates parent directories and the temp file (O_EXCL, `mode`).
  static Result<TempFile> Create(int root, const std::string& path, mode_t mode);
  // Appends all of `data`.
  Status Append(const char* data, size_t n);
  // Sets the final mode and renames over the target; returns its entry.
  Result<nlohmann::json> Commit();
  // Unlinks the temp file now.
  void Discard();

 private:
  UniqueFd dir_;
  UniqueFd file_;
  std::string tmp_name_;
  std::string name_;
  std::string path_;
  mode_t mode_ = 0644;
};

}  // namespace hutch
