// A minimal QMP (QEMU Machine Protocol) client over the sandbox's
// qmp.sock. Synchronous with short deadlines: every command hutchd sends
// (`stop`, `cont`, `getfd`, `migrate`, `query-migrate`, `query-status`)
// answers within milliseconds; a long migration is started with one
// command and then polled (the caller waits between polls without
// blocking the I/O thread).
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::vm {

class QmpSession {
 public:
  // Connects and negotiates capabilities.
  static Result<QmpSession> Open(const std::string& socket_path,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(3));
  // Runs `command` with `args` (an object, or null for none) and returns
  // its "return" value; QMP errors become Code::kInternal with QEMU's
  // description. `pass_fd` >= 0 travels with the command (SCM_RIGHTS), as
  // `getfd` needs.
  Result<nlohmann::json> Run(const std::string& command, const nlohmann::json& args = nullptr,
                             int pass_fd = -1,
                             std::chrono::milliseconds timeout = std::chrono::seconds(3));

 private:
  explicit QmpSession(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  std::string buf_;
};

// One command on a fresh connection; returns the JSON text of its "return".
Result<std::string> QmpExecute(const std::string& socket_path, const std::string& command,
                               std::chrono::milliseconds timeout = std::chrono::seconds(3));

}  // namespace hutch::vm
