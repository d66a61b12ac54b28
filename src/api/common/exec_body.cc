#include "api/common/exec_body.h"

#include "api/common/json_fields.h"

namespace hutch::api {

Result<ExecBody> ParseExecBody(const nlohmann::json& j, int64_t default_timeout) {
  if (auto st = RejectUnknownFields(j, {"cmd", "argv", "cwd", "env", "user", "stdin",
                                        "timeout_seconds", "detach", "auto_resume"});
      !st.ok())
    return st.error();
  auto cmd = OptString(j, "cmd");
  if (!cmd.ok()) return cmd.error();
  auto argv = OptStringArray(j, "argv");
  if (!argv.ok()) return argv.error();
  auto cwd = OptString(j, "cwd");
  if (!cwd.ok()) return cwd.error();
  auto env = OptStringMap(j, "env");
  if (!env.ok()) return env.error();
  auto user = OptString(j, "user");
  if (!user.ok()) return user.error();
  auto in = OptString(j, "stdin");
  if (!in.ok()) return in.error();
  auto timeout = OptInt(j, "timeout_seconds", 0, 7 * 24 * 3600);
  if (!timeout.ok()) return timeout.error();
  auto detach = OptBool(j, "detach");
  if (!detach.ok()) return detach.error();
  auto auto_resume = OptBool(j, "auto_resume");
  if (!auto_resume.ok()) return auto_resume.error();
  if (cmd->has_value() == argv->has_value())
    return MakeError(Code::kInvalidRequest, "exactly one of 'cmd' and 'argv' is required");
  ExecBody b;
  ExecRequest& r = b.req;
  if (*cmd) {
    if ((*cmd)->empty()) return MakeError(Code::kInvalidRequest, "'cmd' is empty");
    r.argv = {"/bin/sh", "-c", **cmd};
    b.cmd = **cmd;
  } else {
    if ((*argv)->empty() || (**argv)[0].empty())
      return MakeError(Code::kInvalidRequest, "'argv' is empty");
    r.argv = **argv;
  }
  for (const auto& a : r.argv)
    if (a.find('\0') != std::string::npos)
      return MakeError(Code::kInvalidRequest, "command contains a NUL byte");
  if (*cwd) {
    if (auto st = CheckPath(**cwd, "cwd"); !st.ok()) return st.error();
    r.cwd = **cwd;
  }
  if (*env) {
    for (const auto& [k, v] : **env)
      if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
          v.find('\0') != std::string::npos)
        return MakeError(Code::kInvalidRequest, "invalid env variable name '" + k + "'");
    r.env = **env;
  }
  if (*user) r.user = **user;
  if (*in) r.stdin_data = **in;
  r.timeout_seconds = timeout->value_or(default_timeout);
  r.detach = detach->value_or(false);
  b.auto_resume = auto_resume->value_or(false);
  return b;
}

nlohmann::json ExitJson(const ExitInfo& e) {
  return {{"exit_code", e.exit_code},
          {"duration_ms", e.duration_ms},
          {"timed_out", e.timed_out},
          {"oom_killed", e.oom_killed}};
}

std::string SseJsonEvent(const char* name, const nlohmann::json& data) {
  return std::string("event: ") + name +
         "\ndata: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace hutch::api
