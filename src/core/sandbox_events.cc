#include "core/sandbox_events.h"

#include <cstdio>

namespace hutch {

namespace {

// Enough to recognise a command in a list; the process API has it whole.
constexpr size_t kCommandMax = 200;

std::string Shape(const SandboxRecord& r) {
  char cpu[32];
  std::snprintf(cpu, sizeof cpu, "%g", r.cpu);
  return std::string(cpu) + " CPU, " + std::to_string(r.memory_mb) + " MB memory, " +
         std::to_string(r.disk_mb) + " MB disk, network " + net::NetModeName(r.network.mode);
}

}  // namespace

void NoteEvent(Sandbox& sb, EventLevel level, std::string type, std::string message,
               nlohmann::json fields) {
  if (!sb.events) return;
  sb.events->Record(sb.rec.id, level, std::move(type), std::move(message), std::move(fields));
}

void NoteCreated(Sandbox& sb, bool warm) {
  const SandboxRecord& r = sb.rec;
  nlohmann::json fields = {{"template", r.template_name},
                           {"driver", r.driver},
                           {"cpu", r.cpu},
                           {"memory_mb", r.memory_mb},
                           {"disk_mb", r.disk_mb},
                           {"network", net::NetModeName(r.network.mode)},
                           {"warm", warm}};
  if (!r.snapshot.empty()) fields["snapshot"] = r.snapshot;
  if (!r.boot.empty()) fields["boot"] = r.boot;
  std::string from = r.snapshot.empty() ? "template " + r.template_name : "snapshot " + r.snapshot;
  NoteEvent(sb, EventLevel::kInfo, "created",
            "created from " + from + " on the " + r.driver + " driver (" + Shape(r) + ")",
            std::move(fields));
  NoteEvent(sb, EventLevel::kInfo, "started",
            warm ? "started (taken from the warm pool, ready)" : "started and ready",
            {{"warm", warm}});
}

void NoteAdopted(Sandbox& sb) {
  NoteEvent(
      sb, EventLevel::kInfo, "adopted",
      std::string("taken back by hutchd after its restart (") + StatusName(sb.rec.status) + ")");
}

void NoteFailed(Sandbox& sb, const std::string& reason) {
  NoteEvent(sb, EventLevel::kError, "failed", "failed: " + reason, {{"reason", reason}});
}

void NoteStopped(Sandbox& sb, const std::string& reason) {
  NoteEvent(sb, EventLevel::kInfo, "stopped", "stopped: " + reason, {{"reason", reason}});
}

std::string CommandLine(const std::vector<std::string>& argv,
                        const std::optional<std::string>& cmd) {
  std::string line;
  if (cmd) {
    line = *cmd;
  } else {
    for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  }
  if (line.size() > kCommandMax) line = line.substr(0, kCommandMax) + "…";
  return line;
}

void NoteExecStarted(Sandbox& sb, int pid, const std::string& command) {
  NoteEvent(sb, EventLevel::kDebug, "process_started",
            "started pid " + std::to_string(pid) + ": " + command,
            {{"pid", pid}, {"command", command}, {"background", false}});
}

void NoteProcessExited(Sandbox& sb, int pid, const std::string& command, const ExitInfo& exit,
                       bool background) {
  std::string how = exit.signal != 0 ? "killed by signal " + std::to_string(exit.signal)
                                     : "exited with code " + std::to_string(exit.exit_code);
  if (exit.timed_out) how += " (timed out)";
  nlohmann::json fields = {{"pid", pid},
                           {"command", command},
                           {"background", background},
                           {"exit_code", exit.exit_code},
                           {"signal", exit.signal},
                           {"timed_out", exit.timed_out},
                           {"oom_killed", exit.oom_killed},
                           {"duration_ms", exit.duration_ms}};
  const bool clean = exit.exit_code == 0 && exit.signal == 0;
  NoteEvent(sb, clean ? EventLevel::kInfo : EventLevel::kWarn, "process_exited",
            "pid " + std::to_string(pid) + " " + how + ": " + command, fields);
  if (exit.oom_killed)
    NoteEvent(sb, EventLevel::kError, "oom_kill",
              "pid " + std::to_string(pid) + " was killed by the out-of-memory killer: " + command,
              {{"pid", pid}, {"command", command}});
}

}  // namespace hutch
