#include "core/build_copy.h"

#include <archive.h>
#include <archive_entry.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace hutch {
namespace {

Error Bad(const std::string& what) { return MakeError(Code::kInvalidRequest, "copy: " + what); }

// "./a//b/" -> "a/b"; nullopt when a part is ".." or the path is absolute.
std::optional<std::string> NormalizeRelative(const std::string& p) {
  if (!p.empty() && p[0] == '/') return std::nullopt;
  std::string out;
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return std::nullopt;
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

std::string Join(const std::string& dir, const std::string& rel) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (rel.empty()) return d;
  return d == "/" ? "/" + rel : d + "/" + rel;
}

std::string BaseName(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool IsUnder(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

using ArchivePtr = std::unique_ptr<struct archive, decltype(&archive_read_free)>;

}  // namespace

Result<std::vector<ArchiveEntry>> ReadTarArchive(std::string_view bytes, uint64_t max_bytes) {
  ArchivePtr a(archive_read_new(), &archive_read_free);
  if (!a) return MakeError(Code::kInternal, "copy: archive_read_new failed");
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_none(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    return Bad(std::string("the upload is not a tar archive: ") + archive_error_string(a.get()));
  std::vector<ArchiveEntry> out;
  uint64_t total = 0;
  struct archive_entry* e = nullptr;
  while (true) {
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Bad(std::string("the upload's archive is damaged: ") + archive_error_string(a.get()));
    const char* name = archive_entry_pathname(e);
    const std::string raw = name ? name : "";
    auto path = NormalizeRelative(raw);
    if (!path) return Bad("the archive names '" + raw + "', outside of it");
    ArchiveEntry out_e;
    out_e.path = *path;
    out_e.mode = archive_entry_perm(e);
    const mode_t type = archive_entry_filetype(e);
    if (archive_entry_hardlink(e) != nullptr)
      return Bad("'" + raw + "' is a hard link (not supported)");
    if (type == AE_IFDIR) {
      out_e.type = ArchiveEntry::Type::kDir;
    } else if (type == AE_IFLNK) {
      out_e.type = ArchiveEntry::Type::kSymlink;
      const char* t = archive_entry_symlink(e);
      out_e.link = t ? t : "";
    } else if (type == AE_IFREG) {
      const la_int64_t size = archive_entry_size(e);
      total += static_cast<uint64_t>(size < 0 ? 0 : size);
      if (total > max_bytes)
        return MakeError(Code::kPayloadTooLarge, "copy: the archive's files exceed " +
                                                     std::to_string(max_bytes >> 20) + " MiB");
      out_e.data.resize(static_cast<size_t>(size < 0 ? 0 : size));
      const la_ssize_t got = archive_read_data(a.get(), out_e.data.data(), out_e.data.size());
      if (got < 0 || static_cast<size_t>(got) != out_e.data.size())
        return Bad("'" + raw + "' is cut short in the archive");
    } else {
      return Bad("'" + raw + "' is not a file, directory or symlink");
    }
    if (out_e.path.empty()) continue;  // the archive's "./" itself
    out.push_back(std::move(out_e));
  }
  return out;
}

Result<std::vector<CopyTarget>> PlanCopy(const std::vector<ArchiveEntry>& entries,
                                         const std::string& src, const std::string& dest) {
  auto s = NormalizeRelative(src);
  if (!s) return Bad("'src' " + src + " leaves the build context");
  if (dest.empty() || dest[0] != '/') return Bad("'dest' must be absolute (got '" + dest + "')");
  const bool into_dir = dest.back() == '/';
  std::vector<CopyTarget> out;
  // A directory `d`'s contents (not `d` itself) into `to`.
  auto contents = [&](const std::string& d, const std::string& to) {
    for (const auto& e : entries)
      if (d.empty() || IsUnder(e.path, d))
        out.push_back({&e, Join(to, d.empty() ? e.path : e.path.substr(d.size() + 1))});
  };
  auto is_dir = [&](const std::string& p) {
    for (const auto& e : entries)
      if ((e.path == p && e.type == ArchiveEntry::Type::kDir) || IsUnder(e.path, p)) return true;
    return false;
  };
  if (s->empty()) {
    contents("", dest);
  } else if (s->find_first_of("*?[") != std::string::npos) {
    for (const auto& e : entries) {
      if (fnmatch(s->c_str(), e.path.c_str(), FNM_PATHNAME) != 0) continue;
      if (e.type == ArchiveEntry::Type::kDir) contents(e.path, dest);
      else out.push_back({&e, Join(dest, BaseName(e.path))});
    }
  } else if (is_dir(*s)) {
    contents(*s, dest);
  } else {
    for (const auto& e : entries)
      if (e.path == *s)
        out.push_back({&e, into_dir ? Join(dest, BaseName(e.path)) : Join(dest, "")});
  }
  if (out.empty()) return Bad("'" + src + "' matches nothing in the uploaded files");
  return out;
}

namespace {

// The fields of the line of /etc/passwd or /etc/group naming `name` (or
// with `name` as its numeric id when `by_id`).
std::optional<std::vector<std::string>> FindLine(const std::string& text, const std::string& name,
                                                 bool by_id) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string part;
    while (std::getline(ls, part, ':')) f.push_back(part);
    if (f.size() < 3) continue;
    if ((by_id ? f[2] : f[0]) == name) return f;
  }
  return std::nullopt;
}

std::optional<uint32_t> Number(const std::string& s) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const unsigned long v = std::stoul(s);
  if (v > 0xFFFFFFFEul) return std::nullopt;
  return static_cast<uint32_t>(v);
}

}  // namespace

Result<std::pair<uint32_t, uint32_t>> ResolveOwner(const std::string& owner,
                                                   const std::string& passwd,
                                                   const std::string& group) {
  const size_t colon = owner.find(':');
  const std::string u = owner.substr(0, colon);
  const std::string g = colon == std::string::npos ? "" : owner.substr(colon + 1);
  uint32_t uid = 0, gid = 0;
  if (auto n = Number(u)) {
    uid = *n;
    auto line = FindLine(passwd, u, true);
    gid = line && line->size() > 3 ? Number((*line)[3]).value_or(*n) : *n;
  } else {
    auto line = FindLine(passwd, u, false);
    if (!line || line->size() < 4) return Bad("owner: no user '" + u + "' in /etc/passwd");
    auto id = Number((*line)[2]);
    auto pg = Number((*line)[3]);
    if (!id || !pg) return Bad("owner: /etc/passwd's line of '" + u + "' is malformed");
    uid = *id;
    gid = *pg;
  }
  if (!g.empty()) {
    if (auto n = Number(g)) {
      gid = *n;
    } else {
      auto line = FindLine(group, g, false);
      auto id = line ? Number((*line)[2]) : std::nullopt;
      if (!id) return Bad("owner: no group '" + g + "' in /etc/group");
      gid = *id;
    }
  }
  return std::make_pair(uid, gid);
}

std::string AbsoluteBuildPath(const std::string& path, const std::string& cwd) {
  const std::string base = cwd.empty() ? "/" : cwd;
  const std::string full = !path.empty() && path[0] == '/' ? path : base + "/" + path;
  std::vector<std::string> parts;
  std::stringstream ss(full);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  if (out.empty()) out = "/";
  if (!path.empty() && path.back() == '/' && out != "/") out += "/";
  return out;
}

}  // namespace hutch
