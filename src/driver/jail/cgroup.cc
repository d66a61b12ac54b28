// CgroupManager::Detect and the cgroupfs helpers shared by v1 and v2.
#include "driver/jail/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <sstream>
#include <thread>

#include "common/unique_fd.h"
#include "driver/jail/cgroup_v1.h"
#include "driver/jail/cgroup_v2.h"

namespace hutch::jail {

Result<std::unique_ptr<CgroupManager>> CgroupManager::Detect() {
  struct statfs st {};
  if (::statfs("/sys/fs/cgroup", &st) != 0) {
    return ErrnoError("cgroup: statfs /sys/fs/cgroup");
  }
  // Pure v2 mounts cgroup2 on /sys/fs/cgroup itself; v1 and hybrid hosts
  // have a tmpfs there with one mount per v1 hierarchy (and, on hybrid, a
  // controller-less cgroup2 at /sys/fs/cgroup/unified that we ignore).
  if (st.f_type == CGROUP2_SUPER_MAGIC) return DetectV2();
  return DetectV1();
}

namespace cgfs {

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status WriteFile(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open " + path);
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError("write '" + value + "' to " + path);
  if (static_cast<size_t>(n) != value.size()) {
    return MakeError(Code::kInternal, "short write to " + path);
  }
  return {};
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

namespace {

Result<uint64_t> ParseUint(std::string_view s, const std::string& what) {
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n')) ++b;
  size_t e = b;
  while (e < s.size() && s[e] != ' ' && s[e] != '\t' && s[e] != '\n') ++e;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + b, s.data() + e, v);
  if (ec != std::errc() || p != s.data() + e || b == e) {
    return MakeError(Code::kInternal,
                     what + ": not a number: '" + std::string(s.substr(b, e - b)) + "'");
  }
  return v;
}

// Undoes the octal escapes (\040 for space, ...) of /proc/self/mountinfo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const char a = s[i + 1], b = s[i + 2], c = s[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out += static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0'));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

Result<uint64_t> ReadUint(const std::string& path) {
  auto s = ReadFile(path);
  if (!s.ok()) return s.error();
  return ParseUint(*s, path);
}

Result<uint64_t> ReadKeyed(const std::string& path, const std::string& key) {
  auto s = ReadFile(path);
  if (!s.ok()) return s.error();
  std::istringstream in(*s);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ' ') {
      return ParseUint(std::string_view(line).substr(key.size() + 1), path + " " + key);
    }
  }
  return uint64_t{0};
}

Result<std::vector<pid_t>> ReadProcs(const std::string& dir) {
  std::vector<pid_t> pids;
  auto s = ReadFile(dir + "/cgroup.procs");
  if (!s.ok()) {
    if (s.error().err == ENOENT) return pids;
    return s.error();
  }
  std::istringstream in(*s);
  long pid;
  while (in >> pid) {
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + path);
  return {};
}

Status RemoveDir(const std::string& path, Clock::time_point deadline) {
  for (;;) {
    // cgroupfs rmdir never needs the directory to be empty of files (the
    // control files are not real); it fails with EBUSY while tasks are
    // still attached, i.e. until killed processes reach cgroup_exit.
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return {};
    const int err = errno;
    if (err != EBUSY || Clock::now() >= deadline) {
      Error e = ErrnoError("rmdir " + path, err);
      if (err == EBUSY) e.code = Code::kUnavailable;
      return e;
    }
    SleepMs(10);
  }
}

std::vector<std::string> ListChildDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    // cgroupfs reports d_type; fall back to stat if a filesystem does not.
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) out.push_back(name);
  }
  ::closedir(d);
  return out;
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string Join(const std::string& base, const std::string& rel) {
  if (rel.empty() || rel == "/") return base;
  if (rel[0] == '/') return base + rel;
  return base + "/" + rel;
}

Result<std::vector<MountEntry>> ReadMountInfo() {
  auto s = ReadFile("/proc/self/mountinfo");
  if (!s.ok()) return s.error();
  std::vector<MountEntry> out;
  std::istringstream in(*s);
  std::string line;
  // Format (proc(5)): id parent major:minor root mount_point options
  // [optional fields...] - fstype source super_options
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> tok;
    std::string t;
    while (f >> t) tok.push_back(t);
    size_t sep = 6;
    while (sep < tok.size() && tok[sep] != "-") ++sep;
    if (sep + 1 >= tok.size()) continue;  // malformed: no fstype
    MountEntry m;
    m.root = Unescape(tok[3]);
    m.mount_point = Unescape(tok[4]);
    m.fstype = tok[sep + 1];
    if (sep + 3 < tok.size()) {
      std::istringstream o(tok[sep + 3]);
      std::string opt;
      while (std::getline(o, opt, ',')) m.super_options.push_back(opt);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string DirUnderMount(const MountEntry& m, const std::string& own) {
  // A container may see a hierarchy mounted from a subtree (root "/docker/x")
  // while /proc/self/cgroup still shows the full path: strip the root.
  if (m.root == "/") return Join(m.mount_point, own);
  if (own == m.root) return m.mount_point;
  if (own.size() > m.root.size() && own.compare(0, m.root.size(), m.root) == 0 &&
      own[m.root.size()] == '/') {
    return Join(m.mount_point, own.substr(m.root.size()));
  }
  return "";
}

}  // namespace cgfs
}  // namespace hutch::jail
