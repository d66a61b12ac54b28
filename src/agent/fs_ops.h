// Synchronous file operations of kFsRequest (docs/wire.md "Files").
//
// Every path is resolved from the agent's root through openat2 with
// RESOLVE_NO_MAGICLINKS, so /proc/<pid>/root-style links cannot be used to
// escape; the final component is then handled with *at() calls on its parent
// directory. Callers wrap operations in an FsIdentity so the kernel checks
// permissions as the requesting user and new files get that user's ownership.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::agent {

// Takes the fs uid/gid of a user for its lifetime; restores root after.
class FsIdentity {
 public:
  FsIdentity(uid_t uid, gid_t gid);
  ~FsIdentity();
  FsIdentity(const FsIdentity&) = delete;
  FsIdentity& operator=(const FsIdentity&) = delete;
};

// Error for a failed syscall on `path`, with the API code derived from errno.
Error FsError(const std::string& what, const std::string& path, int err);

// Makes `path` absolute (relative to `home`) and lexically normal ("." and
// ".." removed, no trailing slash). Rejects NUL bytes and empty paths.
Result<std::string> NormalizePath(const std::string& path, const std::string& home);

Result<nlohmann::json> StatEntry(const std::string& path);
Result<nlohmann::json> ListEntries(const std::string& path, int depth);
Result<nlohmann::json> MakeDirs(const std::string& path);  // entry of the dir
Status Remove(const std::string& path, bool recursive);
Result<nlohmann::json> Move(const std::string& from, const std::string& to);  // entry of `to`

// A regular file opened for a ranged read.
struct ReadSource {
  UniqueFd fd;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes to send, already clamped to the file
};
// length < 0 means to the end.
Result<ReadSource> OpenForRead(const std::string& path, int64_t offset, int64_t length);

// A temp file beside the target of a write. Unlinked on destruction unless
// committed, so an aborted upload never leaves debris.
class TempFile {
 public:
  TempFile() = default;
  TempFile(TempFile&& o) noexcept;
  TempFile& operator=(TempFile&& o) noexcept;
  ~TempFile();

  // Creates parent directories and the temp file (O_EXCL, `mode`).
  static Result<TempFile> Create(const std::string& path, mode_t mode);
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

}  // namespace hutch::agent
