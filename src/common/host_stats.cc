#include "common/host_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "common/unique_fd.h"

namespace hutch {

namespace {

// procfs files are generated on read and small (meminfo ~1.5 KiB): one
// read of a fixed buffer, no stream machinery on the create path.
Result<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoError("open " + path);
  std::string out(8192, '\0');
  size_t len = 0;
  while (len < out.size()) {
    ssize_t n = read(fd.get(), out.data() + len, out.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read " + path);
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  out.resize(len);
  return out;
}

// The integer at the start of `s` (after blanks); nullopt when there is none.
std::optional<int64_t> LeadingInt(std::string_view s) {
  size_t i = s.find_first_not_of(" \t");
  if (i == std::string_view::npos) return std::nullopt;
  s.remove_prefix(i);
  std::string digits(s.substr(0, s.find_first_not_of("0123456789")));
  if (digits.empty()) return std::nullopt;
  return std::strtoll(digits.c_str(), nullptr, 10);
}

// "Name:   1234 kB" in /proc/meminfo, in MiB.
std::optional<int64_t> MeminfoMb(std::string_view text, std::string_view name) {
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    if (line.size() > name.size() && line.substr(0, name.size()) == name &&
        line[name.size()] == ':') {
      auto kb = LeadingInt(line.substr(name.size() + 1));
      if (kb) return *kb / 1024;
      return std::nullopt;
    }
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
  return std::nullopt;
}

Result<int64_t> ReadInt(const std::string& path) {
  auto text = ReadSmallFile(path);
  if (!text.ok()) return text.error();
  auto v = LeadingInt(*text);
  if (!v) return MakeError(Code::kInternal, "malformed " + path);
  return *v;
}

// /proc/pressure/memory: "some avg10=… …\nfull avg10=0.00 avg60=…".
std::optional<double> PsiFullAvg10(std::string_view text) {
  size_t full = text.find("full ");
  if (full == std::string_view::npos) return std::nullopt;
  size_t avg = text.find("avg10=", full);
  if (avg == std::string_view::npos) return std::nullopt;
  std::string num(text.substr(avg + 6, text.find(' ', avg) - avg - 6));
  char* end = nullptr;
  double v = std::strtod(num.c_str(), &end);
  if (end == num.c_str()) return std::nullopt;
  return v;
}

}  // namespace

Result<HostStats> HostStatsReader::Read() const {
  HostStats st;
  const std::string meminfo_path = root_ + "/meminfo";
  auto meminfo = ReadSmallFile(meminfo_path);
  if (!meminfo.ok()) return meminfo.error();
  auto total = MeminfoMb(*meminfo, "MemTotal");
  auto avail = MeminfoMb(*meminfo, "MemAvailable");
  if (!total || !avail)
    return MakeError(Code::kInternal, meminfo_path + " has no MemTotal or MemAvailable");
  st.mem_total_mb = *total;
  st.mem_available_mb = *avail;

  // Optional: kernels without PSI have no such file.
  if (auto psi = ReadSmallFile(root_ + "/pressure/memory"); psi.ok())
    st.memory_full_avg10 = PsiFullAvg10(*psi);

  // /proc/loadavg's fourth field, "running/total": total is every task
  // (thread) the kernel has now, the figure pid_max and threads-max bound.
  const std::string loadavg_path = root_ + "/loadavg";
  auto loadavg = ReadSmallFile(loadavg_path);
  if (!loadavg.ok()) return loadavg.error();
  size_t slash = loadavg->find('/');
  auto tasks = slash == std::string::npos
                   ? std::nullopt
                   : LeadingInt(std::string_view(*loadavg).substr(slash + 1));
  if (!tasks) return MakeError(Code::kInternal, "malformed " + loadavg_path);
  st.tasks = *tasks;
  auto pid_max = ReadInt(root_ + "/sys/kernel/pid_max");
  if (!pid_max.ok()) return pid_max.error();
  auto threads_max = ReadInt(root_ + "/sys/kernel/threads-max");
  if (!threads_max.ok()) return threads_max.error();
  st.task_limit = std::min(*pid_max, *threads_max);

  auto file_nr = ReadInt(root_ + "/sys/fs/file-nr");
  if (!file_nr.ok()) return file_nr.error();
  st.files_open = *file_nr;
  auto file_max = ReadInt(root_ + "/sys/fs/file-max");
  if (!file_max.ok()) return file_max.error();
  st.files_max = *file_max;
  return st;
}

}  // namespace hutch
