// What a command is asked to be and how it ended: plain data shared by
// ExecSession, the dialects' request decoders and their fuzz targets (so it
// has no dependency on asio or the driver layer).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hutch {

struct ExecRequest {
  std::vector<std::string> argv;  // cmd is turned into {"/bin/sh","-c",cmd}
  std::map<std::string, std::string> env;
  std::string cwd;
  std::string user;
  std::optional<std::string> stdin_data;
  int64_t timeout_seconds = 60;  // 0: no timeout
  // A deadline finer than seconds (E2B's Connect-Timeout-Ms); when set it
  // replaces timeout_seconds. 0: no timeout.
  std::optional<int64_t> timeout_ms;
  bool detach = false;
};

struct ExitInfo {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool oom_killed = false;
  int64_t duration_ms = 0;
};

}  // namespace hutch
