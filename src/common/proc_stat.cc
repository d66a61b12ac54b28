#include "common/proc_stat.h"

#include <fstream>
#include <sstream>
#include <string>

namespace hutch {

Result<uint64_t> ProcStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return MakeError(Code::kNotFound, "process " + std::to_string(pid) + " is gone");
  // The command name (field 2) may hold spaces and parens: fields after
  // it start after the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size())
    return MakeError(Code::kInternal, "malformed /proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return static_cast<uint64_t>(std::stoull(field));
  }
  return MakeError(Code::kInternal, "malformed /proc/" + std::to_string(pid) + "/stat");
}

}  // namespace hutch
