// A minimal QMP (QEMU Machine Protocol) client: one command per call, over
// the sandbox's qmp.sock. Synchronous with a short deadline: `stop` and
// `cont` answer within milliseconds, and Instance::Pause/Resume are
// synchronous calls on the I/O thread.
#pragma once

#include <chrono>
#include <string>

#include "common/result.h"

namespace hutch::vm {

// Connects, negotiates capabilities, runs `command` (e.g. "stop") and
// returns the JSON text of its "return" value; QMP errors become
// Code::kInternal with QEMU's description.
Result<std::string> QmpExecute(const std::string& socket_path, const std::string& command,
                               std::chrono::milliseconds timeout = std::chrono::seconds(3));

}  // namespace hutch::vm
