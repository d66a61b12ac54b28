// The command body shared by /exec, /exec/stream and /processes, and the
// JSON pieces their answers share (exit object, SSE events).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "core/exec_request.h"

namespace hutch::api {

struct ExecBody {
  ExecRequest req;
  std::optional<std::string> cmd;  // when the body had `cmd` (not `argv`)
  bool auto_resume = false;        // a paused sandbox is resumed, not refused
};

// Validates {cmd|argv, cwd, env, user, stdin, timeout_seconds, detach,
// auto_resume};
// a missing timeout_seconds becomes `default_timeout` (0: none).
Result<ExecBody> ParseExecBody(const nlohmann::json& j, int64_t default_timeout);

// {"exit_code","duration_ms","timed_out","oom_killed"}: the `exit` event and
// the blocking exec's answer.
nlohmann::json ExitJson(const ExitInfo& e);

// "event: <name>\ndata: <json>\n\n"
std::string SseJsonEvent(const char* name, const nlohmann::json& data);

}  // namespace hutch::api
