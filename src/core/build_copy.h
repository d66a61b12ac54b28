// What a template's copy step writes (core/template_spec.h TemplateStep):
// the entries of an uploaded tar archive (E2B's SDK sends one per `copy`,
// gzip or not; read with libarchive), which of them a COPY of `src` takes
// and where each lands (Docker's rules: a file to a path or into a
// directory `dest/`, a directory's contents into `dest`, a glob's matches
// into `dest`), and the uid/gid an owner names in the build sandbox's
// /etc/passwd and /etc/group. Pure functions: the builder writes the plan
// through the agent (the host never opens a sandbox path).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace hutch {

struct ArchiveEntry {
  enum class Type { kFile, kDir, kSymlink };
  std::string path;  // relative, normalized ("a/b.txt"; no "." or ".." parts)
  Type type = Type::kFile;
  uint32_t mode = 0644;
  std::string data;  // a file's bytes
  std::string link;  // a symlink's target
};

// The entries of a tar archive (plain or gzip). Refuses paths leaving the
// archive (absolute, ".."), and archives whose files add up to more than
// `max_bytes`. Hard links and devices are refused as well.
Result<std::vector<ArchiveEntry>> ReadTarArchive(std::string_view bytes, uint64_t max_bytes);

// One thing a copy writes: `entry` at the absolute path `dest`.
struct CopyTarget {
  const ArchiveEntry* entry;
  std::string dest;
};

// Where the entries that `src` selects land under the absolute `dest`:
// "." (or "") is the whole archive; a file goes to `dest` itself, or into
// it when `dest` ends with '/'; a directory's contents go into `dest`; a
// glob (* ? [) takes each match as one of those. Nothing selected is an
// error that names `src`.
Result<std::vector<CopyTarget>> PlanCopy(const std::vector<ArchiveEntry>& entries,
                                         const std::string& src, const std::string& dest);

// `owner` ("name", "uid", "name:group", "uid:gid") as numbers, looked up in
// the texts of a root's /etc/passwd and /etc/group; a user alone takes
// its primary group.
Result<std::pair<uint32_t, uint32_t>> ResolveOwner(const std::string& owner,
                                                   const std::string& passwd,
                                                   const std::string& group);

// `path` made absolute against `cwd` ("/" when empty), with "." and ".."
// parts resolved; a trailing '/' is kept (it says "into this directory").
std::string AbsoluteBuildPath(const std::string& path, const std::string& cwd);

}  // namespace hutch
