// Background processes of a sandbox, as every dialect sees them: start one,
// list them, read one's status, feed its stdin, signal it, and follow its
// output from any byte offset.
//
// The state lives in the sandbox's agent (docs/wire.md "Background
// processes"), not here: these are thin calls over the agent connection, so
// a hutchd that restarted and reconnected sees the same processes with
// their retained output. Everything runs on the I/O thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "core/exec_session.h"
#include "core/sandbox.h"

namespace hutch {

struct ProcessInfo {
  int pid = 0;
  std::vector<std::string> argv;
  std::optional<std::string> cmd;  // the API's `cmd`, when it was started with one
  std::string user;
  std::string cwd;
  bool background = false;  // false: a command of /exec, /exec/stream or a terminal
  bool pty = false;
  bool running = false;
  bool stdin_open = false;
  std::optional<ExitInfo> exit;  // once it ended
  SysTime started_at;
  std::optional<SysTime> ended_at;
  // Background processes only: bytes written so far (the offset the next
  // byte gets) and the oldest offset still retained.
  std::optional<uint64_t> output_bytes;
  std::optional<uint64_t> output_oldest;
};

// Starts `req` as a background process. `cmd` is kept for listings. The
// process's stdin stays open for WriteProcessStdin unless `req.stdin_data`
// is set (then that is its whole input). req.timeout_seconds 0: no timeout.
asio::awaitable<Result<ProcessInfo>> StartProcess(std::shared_ptr<Sandbox> sb,
                                                  const ExecRequest& req,
                                                  std::optional<std::string> cmd);
// Background processes (running and recently ended) and running commands.
asio::awaitable<Result<std::vector<ProcessInfo>>> ListProcesses(std::shared_ptr<Sandbox> sb);
asio::awaitable<Result<ProcessInfo>> GetProcess(std::shared_ptr<Sandbox> sb, int pid);
// Queues `data` for the process's stdin, then closes it if `close`.
asio::awaitable<Result<ProcessInfo>> WriteProcessStdin(std::shared_ptr<Sandbox> sb, int pid,
                                                       std::string_view data, bool close);
// Sends `signal` to the process's group.
asio::awaitable<Result<ProcessInfo>> SignalProcess(std::shared_ptr<Sandbox> sb, int pid,
                                                   int signal);

struct ProcessEvent {
  enum Kind { kStdout, kStderr, kDropped, kExit, kError } kind = kError;
  std::string data;     // kStdout / kStderr
  uint64_t offset = 0;  // kStdout / kStderr: offset of data[0]; kDropped: where output resumes
  uint64_t dropped_from = 0;   // kDropped: the offset that was asked for
  uint64_t dropped_bytes = 0;  // kDropped
  ExitInfo exit;               // kExit
  Error error;                 // kError
};

// One reader of a background process's output: what was retained from an
// offset on, then live output, then its exit. Dropping it stops following;
// the process runs on.
class ProcessFollower {
 public:
  static asio::awaitable<Result<std::unique_ptr<ProcessFollower>>> Attach(
      std::shared_ptr<Sandbox> sb, int pid, uint64_t from);
  // The process as it was when following began.
  const ProcessInfo& info() const { return info_; }
  // Next event, or nullopt if nothing happened within `timeout`. After
  // kExit or kError there are no more.
  asio::awaitable<std::optional<ProcessEvent>> NextFor(std::chrono::milliseconds timeout);
  // Output bytes handed on to the client (returns credit to the agent).
  void Consumed(size_t n) { stream_->Consumed(n); }
  // Wakes a pending NextFor with kError (the client disconnected).
  void Interrupt() { stream_->Interrupt(); }

 private:
  ProcessFollower(std::shared_ptr<Sandbox> sb, std::shared_ptr<AgentStream> s, uint64_t from)
      : sb_(std::move(sb)), stream_(std::move(s)), pos_(from) {}
  std::shared_ptr<Sandbox> sb_;
  std::shared_ptr<AgentStream> stream_;
  ProcessInfo info_;
  uint64_t oom_before_ = 0;
  uint64_t pos_;
  bool done_ = false;
};

}  // namespace hutch
