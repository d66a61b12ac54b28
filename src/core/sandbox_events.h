// What each kind of event in a sandbox's log says (core/event_log.h): its
// type, level, one-line message and fields, written in one place so the
// lifecycle, exec and process code each make one call where the thing
// happens. All of them do nothing for a sandbox without a log yet
// (Sandbox::events null). I/O thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/event_log.h"
#include "core/exec_request.h"
#include "core/sandbox.h"

namespace hutch {

// Any event: the building block of the others.
void NoteEvent(Sandbox& sb, EventLevel level, std::string type, std::string message,
               nlohmann::json fields = nlohmann::json::object());

// Its create was answered (`warm`: a sandbox started ahead of demand was
// claimed): `created` with its template, driver and shape, then `started`.
void NoteCreated(Sandbox& sb, bool warm);
// A restarted hutchd took it back (`adopted`).
void NoteAdopted(Sandbox& sb);
// It failed on its own, or was lost while hutchd was down (`failed`).
void NoteFailed(Sandbox& sb, const std::string& reason);
// It stopped: deleted, expired, server shutdown (`stopped`).
void NoteStopped(Sandbox& sb, const std::string& reason);

// The command as one short line: `cmd` when the API gave one, else argv
// joined by spaces; long ones cut.
std::string CommandLine(const std::vector<std::string>& argv,
                        const std::optional<std::string>& cmd = std::nullopt);
// A command of exec started (`process_started`, level debug: execs are
// many, their exits say what matters).
void NoteExecStarted(Sandbox& sb, int pid, const std::string& command);
// A process ended (`process_exited`; info when it exited 0, warn else;
// and `oom_kill` at level error when the OOM killer took it).
void NoteProcessExited(Sandbox& sb, int pid, const std::string& command, const ExitInfo& exit,
                       bool background);

}  // namespace hutch
